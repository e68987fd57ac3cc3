import json
import sys
import traceback
from dataclasses import replace
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from grading.engine.checks.model import ModelRecord
from grading.engine.core import grade_archive
from grading.engine.sandbox import SandboxUnavailable
from grading.management.packets import find_packet_version
from grading.pipeline import grade_options
from shared.sandboxes import sandbox_for_spec
from takehome.models import effective_policy


class Command(BaseCommand):
    help = (
        "Grade one zip against a packet's latest version and print the evidence as one JSON "
        "object (documented in docs/evidence.md). Stores nothing: this is also how an operator "
        "checks a zip by hand. Exit 0 whenever evidence was produced, a refused archive "
        "included; 1 on an internal error (e.g. the sandbox cannot start)."
    )

    def add_arguments(self, parser):
        parser.add_argument("path", help="the zip to grade")
        parser.add_argument("--packet", required=True, help="packet slug, e.g. refund-sum")
        parser.add_argument("--packet-version", type=int, dest="packet_version", help="packet version number (default: the latest)")
        parser.add_argument("--indent", type=int, default=None, help="pretty-print with this indent")
        parser.add_argument("--seed", type=int, default=None,
                            help="the hidden tests' seed (runs.reference_vs_submitted.hidden_seed of earlier "
                                 "evidence), to draw the same inputs again; default: a fresh one")

    def handle(self, *args, **options):
        version = find_packet_version(options["packet"], options["packet_version"])
        path = Path(options["path"])
        if not path.is_file():
            raise CommandError(f"No file at {path}.")
        spec = version.to_spec()
        try:
            # The version's policy decides which artifacts are asked for; the exchanges are the server's (none here).
            model = ModelRecord(policy=effective_policy(version), configured=bool(settings.MODEL_URL))
            options_ = replace(grade_options(), hidden_seed=options["seed"])
            evidence = grade_archive(path, spec, sandbox_for_spec(spec), model=model, options=options_)
        except SandboxUnavailable as exc:  # this machine cannot grade: the sentence says why and how to fix it
            raise CommandError(f"Grading cannot run here: {exc}") from exc
        except Exception as exc:  # an internal error: say what, exit 1
            traceback.print_exc(file=sys.stderr)
            raise CommandError(f"Grading failed on our side: {exc}") from exc
        self.stdout.write(json.dumps(evidence, indent=options["indent"], ensure_ascii=False))
