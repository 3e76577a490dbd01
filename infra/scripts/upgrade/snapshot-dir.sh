# Makes the directory .Dir the etcd snapshot taken before an upgrade is
# uploaded to, readable by root alone (whoever made it before): a
# snapshot holds every Secret.
mkdir -p {{q .Dir}}
chmod 0700 {{q .Dir}}
