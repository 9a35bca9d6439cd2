# fencing-lock's stderr is a full pipe (its reader stalled): when the lease
# is lost, the "lease lost" message blocks before SIGTERM is sent.
import os, subprocess, time, fcntl
def psql(sql):
    return subprocess.run(['psql','-XAtq','-c',sql],capture_output=True,text=True).stdout.strip()
open(os.environ['W'] + '/blk.log', 'w').close()
r, w = os.pipe()
fcntl.fcntl(w, fcntl.F_SETFL, os.O_NONBLOCK)
n = 0
try:
    while True: n += os.write(w, b'x'*4096)
except BlockingIOError: pass
fcntl.fcntl(w, fcntl.F_SETFL, 0)
print('stderr pipe pre-filled with', n, 'bytes (reader stalled)')
psql("select fencing.lease_force_release('blk')")
p = subprocess.Popen(['fencing-lock','--ttl','3s','blk','--','sh','-c',
   'trap "echo A got TERM >>$W/blk.log; exit 143" TERM; while :; do echo "A alive $(date +%T.%N)" >>$W/blk.log; sleep 0.5; done'],
   stderr=w)
os.close(w)
time.sleep(1.5)
print('force_release:', psql("select fencing.lease_force_release('blk')"))
t0=time.time()
b = subprocess.run(['fencing-lock','--ttl','3s','--wait','10s','blk','--','sh','-c','echo "B start $(date +%T.%N) token=$FENCING_TOKEN" >>$W/blk.log; sleep 2; echo "B end $(date +%T.%N)" >>$W/blk.log'],capture_output=True,text=True)
print('B:', b.returncode, b.stdout.strip(), b.stderr.strip())
time.sleep(5)
print('A runner alive after %.1fs:'%(time.time()-t0), p.poll() is None)
print(open(os.environ['W'] + '/blk.log').read())
print(subprocess.run(['ps','-o','pid,stat,wchan:20,cmd','--ppid',str(p.pid),'-p',str(p.pid)],capture_output=True,text=True).stdout)
# unblock: drain the pipe
os.set_blocking(r, False)
try:
    while os.read(r, 65536): pass
except BlockingIOError: pass
time.sleep(1)
try:
    print('after draining:', os.read(r,65536).decode(errors='replace')[-400:])
except BlockingIOError: pass
print('A exit', p.wait(timeout=20))
