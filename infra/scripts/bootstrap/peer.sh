# Tells whether the cluster already runs on this control-plane peer,
# before an init could start a second one. Prints "live" when its API
# answers, "data" when it holds etcd member data (.MemberDir) but its API
# does not answer, else "none".
if test -f {{q .AdminConf}} && {{.Kubectl}} get --raw=/readyz >/dev/null 2>&1; then
	echo live
elif test -d {{q .MemberDir}}; then
	echo data
else
	echo none
fi
