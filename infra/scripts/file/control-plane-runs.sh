# Whether a control plane runs on this node (its apiserver's static pod
# manifest .Manifest is there): prints "running", or nothing when none
# does. Its key material must not be removed under it.
if [ -f {{q .Manifest}} ]; then
	echo running
fi
