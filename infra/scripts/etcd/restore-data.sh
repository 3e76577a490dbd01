# Puts the restored data (the tarball uploaded to .Upload) in .DataDir,
# the data there before moved aside first (etcd/move-aside).
{{template "etcd/move-aside" .}}
d={{q .DataDir}}
mkdir -p "$d"
chmod 700 "$d"
tar xzf {{q .Upload}} -C "$d"
rm -f {{q .Upload}}
