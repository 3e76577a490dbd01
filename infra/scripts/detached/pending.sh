# Tells whether the detached run directory .Dir is there: a run an earlier
# up started and no up collected yet. Prints "pending" when it is; exits
# 1 when not.
test -d {{q .Dir}} && echo pending
