# interactive shell: "fencing-lock ... -- cat &" then "fg": the command is
# stopped by SIGTTIN in a group the shell does not know; fg resumes only
# fencing-lock, the command stays stopped, the lease is renewed forever.
import os, pty, time, subprocess, select
env = dict(os.environ, PS1='$ ')
pid, fd = pty.fork()
if pid == 0:
    os.execvpe('bash', ['bash', '--norc', '-i'], env)
def out(t=1.0):
    buf = b''; end = time.time() + t
    while time.time() < end:
        r, _, _ = select.select([fd], [], [], 0.1)
        if r:
            try: buf += os.read(fd, 4096)
            except OSError: break
    return buf.decode(errors='replace')
def send(s): os.write(fd, s.encode())
out(0.5)
send("fencing-lock -v --ttl 3s ttin -- cat &\n"); print(out(2))
send("fg\n"); print(out(8))
print(subprocess.run("ps -o pid,pgid,stat,cmd -C cat,fencing-lock", shell=True, capture_output=True, text=True).stdout)
print(subprocess.run(["psql","-XAtqc","select name,state,expires_at > clock_timestamp() from fencing.lease_status where name='ttin'"],capture_output=True,text=True).stdout)
send("\x03"); print(out(1)); send("\x03"); print(out(2))
send("exit\n"); out(0.5)
