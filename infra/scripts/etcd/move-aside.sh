# Moves the etcd member directory under .DataDir, if any, to a new
# directory of its own under .BeforeDir, and prints .KeptPrefix followed
# by where it went: every restore keeps the data it replaced, even two in
# the same second.
if [ -d {{q .DataDir}}/member ]; then
	mkdir -p {{q .BeforeDir}}
	chmod 700 {{q .BeforeDir}}
	b=$(mktemp -d {{q .BeforeDir}}/"$(date -u +%Y%m%dT%H%M%SZ)"-XXXX)
	mv {{q .DataDir}}/member "$b/"
	echo {{q .KeptPrefix}}"$b/member"
fi
