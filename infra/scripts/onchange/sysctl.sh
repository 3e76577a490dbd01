# Loads the sysctl file .Path just written. -e: keys a kernel lacks
# (bridge ones before br_netfilter loads) must not fail the run.
sysctl -e -p {{q .Path}} >/dev/null
