# Kills the process group .PID of a cancelled command (its shell is the
# group's leader), so nothing the command started outlives it. A group
# already gone is no failure.
kill -KILL -- -{{.PID}} 2>/dev/null || true
