"""onnx.checker over exported models: every DIR/<case>/model.onnx must pass check_model with
full_check (shape inference included). Exit 77 (CTest's skip) when python3-onnx is absent.

    /usr/bin/python3 tests/onnx/export/check_models.py DIR [DIR ...]
"""
import os
import sys

try:
    import onnx
except ImportError:
    print("SKIP: python3-onnx is not installed (apt-get install python3-onnx)")
    sys.exit(77)


def main(dirs):
    models = []
    for d in dirs:
        for case in sorted(os.listdir(d)):
            path = os.path.join(d, case, "model.onnx")
            if os.path.isfile(path):
                models.append((case, path))
    if not models:
        print("no DIR/<case>/model.onnx found under", dirs)
        return 1
    failed = 0
    known = onnx.defs.onnx_opset_version()
    skipped = 0
    for case, path in models:
        model = onnx.load(path)
        opset = max(o.version for o in model.opset_import if o.domain in ("", "ai.onnx"))
        if opset > known:
            # The checker would judge the ops by older schemas (Reduce* axes moved to inputs at 18).
            print(f"SKIP {case}: opset {opset} is newer than this onnx {onnx.__version__} knows ({known})")
            skipped += 1
            continue
        try:
            onnx.checker.check_model(model, full_check=True)
        except Exception as e:  # the checker's own error types differ between versions
            failed += 1
            print(f"FAIL {case}: {str(e).splitlines()[0] if str(e) else type(e).__name__}")
    print(f"{len(models) - failed - skipped} passed, {failed} failed, {skipped} skipped (onnx {onnx.__version__})")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
