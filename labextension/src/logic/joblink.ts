/**
 * The link a notification carries to a job's view: `<server>/lab?paddle-job=<name>` (the server
 * writes it in `notify/messages.py`, `JOB_LINK_PARAMETER`).  Opening JupyterLab with it opens
 * that job's view once the layout is restored.
 */
export const JOB_LINK_PARAMETER = 'paddle-job';

/** The job a page address names, or null. */
export function jobFromLink(search: string): string | null {
  const name = new URLSearchParams(search).get(JOB_LINK_PARAMETER);
  return name && name.trim() ? name.trim() : null;
}
