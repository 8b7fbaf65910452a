#!/usr/bin/env python3
"""vcuda's frame tags (src/mac.c) against an independent implementation: Python's
cryptography package, AESGCM(key).encrypt(iv, b"", data), which with an empty plaintext
returns just the 16-byte tag over `data` as associated data -- what vcuda computes over a
frame.  Random keys, IVs and data, lengths 0 .. 300 KiB (the edges of blocks, of the bytes
mac.c keeps waiting and of its groups of 16 blocks, then random ones), fed to
`vcuda_proto_test gmac_stdin` in pieces of varying length, through the path named on
the command line (VCUDA_MAC_IMPL, mac.h): auto (the CPU's best), pclmul (the 128-bit
carry-less multiply path), portable.  Exit 77 (skipped), saying why, where cryptography
is missing or where the CPU lacks the instructions that the path asked for needs."""
import argparse
import os
import random
import struct
import subprocess
import sys


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("path", choices=["auto", "pclmul", "portable"])
    ap.add_argument("--proto-test", required=True, help="vcuda_proto_test")
    ap.add_argument("--runner", default="", help="command prefix for it (e.g. qemu-aarch64)")
    ap.add_argument("--seed", type=int, default=20261201)
    a = ap.parse_args()
    try:
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM
    except ImportError as e:
        print(f"skipped: Python's cryptography package is not importable ({e})")
        return 77
    rng = random.Random(a.seed)
    edges = [0, 1, 15, 16, 17, 111, 112, 127, 128, 129, 143, 144, 145, 255, 256, 257, 383, 384, 385,
             511, 512, 513, 1023, 1024, 1068, 4095, 4096, 4097, 65535, 65536, 65537, 300 * 1024]
    lengths = (edges + [rng.randrange(0, 301) for _ in range(200)] + [rng.randrange(0, 4097) for _ in range(150)]
               + [rng.randrange(0, 300 * 1024 + 1) for _ in range(120)])
    records = [(rng.randbytes(32), rng.randbytes(12), rng.randbytes(n)) for n in lengths]
    stdin = b"".join(struct.pack("<I", len(d)) + k + iv + d for k, iv, d in records)
    cmd = a.runner.split() + [a.proto_test, "gmac_stdin"]
    r = subprocess.run(cmd, input=stdin, capture_output=True, timeout=600,
                       env=dict(os.environ, VCUDA_MAC_IMPL=a.path))
    sys.stderr.write(r.stderr.decode(errors="replace"))
    if r.returncode:
        print(f"FAIL: {' '.join(cmd)} exited {r.returncode}")
        return 1
    lines = r.stdout.decode().splitlines()
    impl = lines[0].removeprefix("path: ") if lines else "(nothing)"
    print(f"VCUDA_MAC_IMPL={a.path}: {impl}")
    if a.path != "portable" and impl.startswith("portable"):
        print(f"skipped: this CPU has no AES and carry-less multiply instructions for VCUDA_MAC_IMPL={a.path}")
        return 77
    if (a.path == "portable") != impl.startswith("portable") or (a.path == "pclmul" and "VPCLMULQDQ" in impl):
        print(f"FAIL: VCUDA_MAC_IMPL={a.path} ran {impl}")
        return 1
    got = lines[1:]
    if len(got) != len(records):
        print(f"FAIL: {len(got)} tags for {len(records)} records")
        return 1
    bad = 0
    for (k, iv, d), tag in zip(records, got):
        want = AESGCM(k).encrypt(iv, b"", d).hex()
        if tag != want:
            bad += 1
            if bad <= 5:
                print(f"FAIL: {len(d)} bytes, key {k.hex()} iv {iv.hex()}: got {tag}, want {want}")
    total = sum(len(d) for _, _, d in records)
    print(f"{len(records) - bad} of {len(records)} tags equal to cryptography's ({total} bytes, seed {a.seed})")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
