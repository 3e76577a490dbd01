# Removes the detached run in .Dir (detached/start) once its result is
# collected, or once it is lost: the next start of its step starts anew.
rm -rf {{q .Dir}}
