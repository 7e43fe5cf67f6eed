"""`--format json` for the commands that print reports (validate, ops, describe, info): one JSON object on
stdout for scripts, built by dmlcli.reports; README "JSON reports" documents the keys."""

from __future__ import annotations

import json

import click

format_option = click.option(
    "--format", "output_format", type=click.Choice(["text", "json"]), default="text", show_default=True,
    help="text for people; json: one JSON object on stdout for scripts (keys in the README).")


def echo_json(document: dict) -> None:
    click.echo(json.dumps(document, indent=2, ensure_ascii=False))


def validate_as_json(req, inputs, dtype, convert=(), spelling=None) -> None:
    """validate's verdict as JSON on stdout. A rejected call is a report too: its JSON goes to stdout, then
    the error goes on as without --format (its line on stderr, exit code 3). `spelling`: the ONNX name the
    operator was given by (onnx_spellings.OnnxSpelling), or None."""
    from ..engine import plan_sources
    from ..errors import ValidationError
    from .reports import validation_report

    try:
        verdict = plan_sources(req, inputs, dtype, convert)
    except ValidationError as error:
        echo_json(validation_report(req.operator, req.feature_level, error=error, onnx=spelling))
        raise
    echo_json(validation_report(req.operator, req.feature_level, verdict=verdict, onnx=spelling))
