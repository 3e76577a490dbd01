# Starts the command .Cmd (a whole rendered script, which keeps its own
# name line and header) in the run directory .Dir, in a session of its
# own, so that neither a dropped SSH connection nor a killed up cuts a
# kubeadm or apt run short. A run still going there is left alone, and one
# that finished without being collected is kept when it ran the same
# command (.Tag, a hash of it): the same command never runs twice at
# once, and a result is never lost.
# What a run prints (join commands, tokens, certificate keys) is root's
# only: the directory and its files are made under umask 077, and the
# directory is 0700 even when an older version made it (its parents keep
# the node's umask). The command gets the node's umask back (u), since
# 077 would leak into what apt and kubeadm create.
# Prints "running", "finished" (a run of .Cmd waits to be collected) or
# "started".
d={{q .Dir}}
u=$(umask)
mkdir -p "$(dirname "$d")"
umask 077
mkdir -p "$d"
chmod 700 "$d"
if [ -f "$d/pid" ] && kill -0 "$(cat "$d/pid")" 2>/dev/null; then echo running; exit 0; fi
if [ -f "$d/rc" ] && [ "$(cat "$d/tag" 2>/dev/null)" = {{q .Tag}} ]; then echo finished; exit 0; fi
rm -f "$d/rc" "$d/out" "$d/pid"
echo {{q .Tag}} > "$d/tag"
# The wrapper's script is single-quoted on purpose: its $0, $1, $2 and $$
# are its own (the directory, the command, the umask; its pid, which
# setsid made its process group's), expanded when it runs. It has no
# set -e: the exit code is written whatever the command did.
# shellcheck disable=SC2016
setsid sh -c 'echo $$ > "$0/pid.tmp" && mv "$0/pid.tmp" "$0/pid"; (umask "$2"; exec sh -c "$1") > "$0/out" 2>&1; echo $? > "$0/rc.tmp"; mv "$0/rc.tmp" "$0/rc"; rm -f "$0/pid"' "$d" {{q .Cmd}} "$u" </dev/null >/dev/null 2>&1 &
echo started
