#!/usr/bin/env python3
"""The UCX transport on this machine (loopback; UCX picks shared memory or TCP):
    test_ucx.py NET_TEST CLIENT_TEST
A server (`vcuda_net_test serve ucx`) on ucx://127.0.0.1:<port>; the client core
against it (calls, error replies, chunked 64 MiB SINKs, 200 round trips); then the
server is killed and a new client must drop it at start-up, promptly.  Skips (77) when
this build has no UCX."""
import os, signal, subprocess, sys, time

os.environ['VCUDA_TEST_TOKEN'] = 's3cret-test-token'  # test_net.c's server

net_test, client_test = sys.argv[1:3]
srv = subprocess.Popen([net_test, 'serve', 'ucx'], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
line = srv.stdout.readline()
if not line.strip().isdigit():
    err = srv.communicate(timeout=10)[1]
    if 'built without UCX' in err:
        print('skipped: this vcuda was built without UCX')
        sys.exit(77)
    print('server did not start:', err)
    sys.exit(1)
endpoint = f'ucx://127.0.0.1:{int(line)}'
fails = 0
p = subprocess.run([client_test, 'remote_session', endpoint], capture_output=True, text=True, timeout=60)
print(p.stderr)
fails += p.returncode != 0
srv.send_signal(signal.SIGKILL)
srv.wait()
t0 = time.monotonic()
p = subprocess.run([client_test, 'remote_dead', endpoint], capture_output=True, text=True, timeout=60)
print(p.stderr, f'(dead server handled in {time.monotonic() - t0:.2f} s)')
fails += p.returncode != 0
print('FAILED' if fails else 'ok')
sys.exit(1 if fails else 0)
