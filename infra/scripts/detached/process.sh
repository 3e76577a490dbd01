# Tells what the detached run in .Dir (detached/start) runs, for a user
# to find and stop it: its wrapper's pid (its process group's), then the
# command line of the command under it (of the wrapper while it has
# none). The exit status is not read.
d={{q .Dir}}
pid=$(cat "$d/pid" 2>/dev/null)
echo "$pid"
ps -o args= --ppid "$pid" -p "$pid" | tail -n 1
