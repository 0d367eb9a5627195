"""kt-translate --model=a,b: an ensemble of translation models of one tokenizer (decoding/ensemble.py)."""

import shutil

from sentencepiece import sentencepiece_model_pb2

from tests.inference.support import run_cli

LINES = ["A man rides a red bike on the street .", "", "two dogs play in the snow .", "A girl ."]
STDIN = "".join(f"{line}\n" for line in LINES)


def test_an_ensemble_of_a_model_with_itself_translates_as_the_model(trained_workdir, exported):
    flags = ["--nbest=3", "--extra_length=20"]
    alone = run_cli("translate", f"--model={trained_workdir}", *flags, stdin=STDIN).stdout
    assert len(alone.splitlines()) >= 7
    for models in (f"{trained_workdir},{trained_workdir}", f"{exported},{trained_workdir}"):  # the same weights
        both = run_cli("translate", f"--model={models}", *flags, stdin=STDIN)
        assert both.stdout == alone and "ensemble of" in both.stderr


def test_an_ensemble_refuses_another_tokenizer_sampling_and_a_prefix(trained_workdir, tmp_path):
    other = tmp_path / "other"
    shutil.copytree(trained_workdir, other)
    for model_file in (other / "tokenizer").glob("*.model"):  # as many pieces, one of them another
        proto = sentencepiece_model_pb2.ModelProto()
        proto.ParseFromString(model_file.read_bytes())
        proto.pieces[-1].piece = "\u2581zzqx"
        model_file.write_bytes(proto.SerializeToString())
    models = f"--model={trained_workdir},{trained_workdir}"
    for args, message in (([f"--model={trained_workdir},{other}"], "has another vocabulary than"),
                          ([models, "--sampling"], "--sampling: "),
                          ([models, "--target_prefix=tab"], "--target_prefix: ")):
        result = run_cli("translate", *args, stdin=STDIN, check=False)
        assert result.returncode == 2 and message in result.stderr, result.stderr
