{{/* The labels of every object of the chart (the shipped deploy/ files carry the same). */}}
{{- define "paddle-nbext.labels" -}}
app.kubernetes.io/name: paddle-nbext
{{- end }}

{{/* The notebook's ServiceAccount name, required: every Role of the chart is bound to it. */}}
{{- define "paddle-nbext.notebookAccount" -}}
{{- required "notebook.serviceAccount.name is required: the account of the single-user notebook pods (Zero to JupyterHub: singleuser.serviceAccountName)" .Values.notebook.serviceAccount.name -}}
{{- end }}

{{/* The job master's ServiceAccount name ("" with master.perJob: one account per job). */}}
{{- define "paddle-nbext.masterAccount" -}}
{{- if .Values.master.perJob -}}{{- else -}}
{{- required "master.serviceAccount.name is required unless master.perJob is true" .Values.master.serviceAccount.name -}}
{{- end -}}
{{- end }}
