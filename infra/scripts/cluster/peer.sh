# Tells whether the cluster runs on this control-plane peer, while the
# bootstrap looks for it on every node. Prints .Live when its API answers,
# .Data when it holds etcd member data (.MemberDir) but its API does not
# answer (whether the cluster exists is then unknown), else .None.
if test -f {{q .AdminConf}} && {{.Kubectl}} get --raw=/readyz >/dev/null 2>&1; then
	echo {{q .Live}}
elif test -d {{q .MemberDir}}; then
	echo {{q .Data}}
else
	echo {{q .None}}
fi
