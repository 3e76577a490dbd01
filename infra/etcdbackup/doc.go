// Package etcdbackup saves, checks and restores the cluster's etcd data:
// consistent snapshots taken with the etcd client through an SSH tunnel to
// a healthy member, each written atomically with its metadata and SHA-256
// beside it and opened before it counts as good; the newest snapshot a
// node's timer saved, fetched off the node; and the disaster recovery for
// a cluster that lost etcd's quorum: a snapshot (or a surviving member's
// raw db) restored as a new one-member cluster with a new cluster ID on
// one control-plane node, the other members re-added as fresh ones.
//
// Snapshots are opened with etcdutl's own code (go.etcd.io/etcd/etcdutl's
// snapshot package) on the machine running homelab, never on a node:
// kubeadm's nodes run etcd in a container and have no etcdutl.
package etcdbackup
