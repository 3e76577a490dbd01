package provider

// kubeadm's runs and resets, shared by KubeadmInit (kubeadminit.go) and
// KubeadmJoin (kubeadmjoin.go).

import (
	"github.com/homelab-dev/homelab/infra/scripts"
	"github.com/homelab-dev/homelab/roles/nodefacts"
)

// etcdAsideArgs are kubeadm/etcd-aside's values, which every reset
// includes: reportAside reads back the line it prints.
type etcdAsideArgs struct {
	Member, AsideDir, EtcdPattern, AsidePrefix string
}

var etcdAside = etcdAsideArgs{Member: nodefacts.EtcdMemberDir, AsideDir: nodefacts.EtcdAsideDir,
	EtcdPattern: nodefacts.ProcessPattern(nodefacts.Etcd), AsidePrefix: asidePrefix}

// resetKeepCAsArgs are kubeadm/reset-keep-cas's values. MarkerGlob is
// the product's own glob, not one word.
type resetKeepCAsArgs struct {
	etcdAsideArgs
	Keep, PKI, Manifests, KubeDir, MarkerGlob string
	Identity                                  []string
}

// resetKeepingCAs undoes an interrupted kubeadm run: the CAs are the
// bundle's and must survive it, or the retry would mint a new cluster
// identity, and etcd's data is moved aside, not deleted. The node's etcd
// member, if it has one, was removed first (removeOwnMember).
func resetKeepingCAs() scripts.Script {
	return scripts.Render("kubeadm/reset-keep-cas", resetKeepCAsArgs{etcdAsideArgs: etcdAside,
		Keep: nodefacts.KubernetesDir + "/.homelab-ca-keep", PKI: nodefacts.PKIDir, Manifests: nodefacts.ManifestsDir,
		KubeDir: nodefacts.KubernetesDir, MarkerGlob: nodefacts.MarkerGlob, Identity: nodefacts.IdentityFiles})
}

// kubeadmRunArgs are kubeadm/init's and kubeadm/join's values: the
// config file, the completion marker, and the preflight errors to
// ignore, comma-separated as kubeadm takes them ("" for none).
type kubeadmRunArgs struct {
	Config, Marker, IgnorePreflight string
}

// leftovers is what a node keeps of the cluster until it is reset.
func leftovers(controlPlane bool) string {
	if controlPlane {
		return "the cluster's CA keys (ca.key, etcd/ca.key, front-proxy-ca.key), sa.key, the secrets encryption key, etcd's data and its kubelet credentials"
	}
	return "its kubelet credentials"
}

// resetArgs are kubeadm/reset's values. MarkerGlob is the product's own
// glob, not one word.
type resetArgs struct {
	etcdAsideArgs
	Manifests, KubeDir, MarkerGlob, Runs, EtcdData, KubeletPKI string
}

// resetNode resets a node leaving the cluster, its etcd data moved aside.
func resetNode() scripts.Script {
	return scripts.Render("kubeadm/reset", resetArgs{etcdAsideArgs: etcdAside,
		Manifests: nodefacts.ManifestsDir, KubeDir: nodefacts.KubernetesDir, MarkerGlob: nodefacts.MarkerGlob,
		Runs: runsDir, EtcdData: nodefacts.EtcdDataDir, KubeletPKI: nodefacts.KubeletPKIDir})
}
