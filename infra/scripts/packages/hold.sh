# Holds the packages .Names at their installed versions, so an
# unattended upgrade never moves them. Prints nothing.
apt-mark hold {{qs .Names}} >/dev/null
