"""The stand-in's ready hint names the credentials it accepts, as a line a shell can run (issue 34, item 5).

``make sagemaker-local`` starts it with ``SM_ACCESS_KEY_ID`` / ``SM_SECRET_ACCESS_KEY`` as its
AWS_* variables, so "the same credentials as this process" told a user nothing they could copy.
The shared stand-in is started the same way (its own key pair in its environment); its output is
what a user sees in the terminal.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys

from sagemaker_local_fixture import ACCESS_KEY_ID, SECRET_ACCESS_KEY, SageMakerLocal

_INVOKE = """
import json, sys, boto3
response = boto3.Session().client("sagemaker-runtime").invoke_endpoint(
    EndpointName=sys.argv[1], ContentType="application/json", Body=json.dumps({"text": "Hi.", "format": "wav"}))
print(json.dumps({"content_type": response["ContentType"], "riff": response["Body"].read()[:4] == b"RIFF"}))
"""


def export_line(stand_in: SageMakerLocal) -> str:
    lines = [line for line in stand_in.output if line.startswith("export ")]
    assert len(lines) == 1, "\n".join(stand_in.output[:20])
    return lines[0]


def test_the_hint_names_the_key_id_it_accepts_and_not_this_process(sagemaker_local: SageMakerLocal) -> None:
    hint = "\n".join(line for line in sagemaker_local.output if "sagemaker-local: ready" in line)
    assert ACCESS_KEY_ID in hint and "same AWS_ACCESS_KEY_ID" not in hint
    exported = dict(word.split("=", 1) for word in shlex.split(export_line(sagemaker_local))[1:])
    assert exported["AWS_ACCESS_KEY_ID"] == ACCESS_KEY_ID
    assert exported["AWS_SECRET_ACCESS_KEY"] == SECRET_ACCESS_KEY
    assert exported["AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME"] == sagemaker_local.endpoint_url
    assert exported["AWS_CA_BUNDLE"] == sagemaker_local.ca_bundle


def test_a_shell_that_runs_the_export_line_reaches_the_endpoint_with_boto3(sagemaker_local: SageMakerLocal) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update({"AWS_CONFIG_FILE": os.devnull, "AWS_SHARED_CREDENTIALS_FILE": os.devnull})
    script = f"{export_line(sagemaker_local)} && exec {shlex.quote(sys.executable)} -c {shlex.quote(_INVOKE)} " \
             f"{shlex.quote(sagemaker_local.endpoint_name)}"
    done = subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"content_type": "audio/wav", "riff": True}
