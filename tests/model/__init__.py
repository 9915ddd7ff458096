"""Unit tests of `paddle_nbext.model`: the job model both sides share (contract, fields, rules, spec, schema)."""
