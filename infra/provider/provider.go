// Package provider is pulumi-resource-homelab: Pulumi resources that act on
// homelab nodes over SSH and read their live state back, so `preview
// --refresh` shows real drift (a changed file, a stopped service, a swapped
// NIC, a missing etcd member) instead of re-running opaque commands.
package provider

import (
	"context"
	"fmt"
	"os"
	"time"

	p "github.com/pulumi/pulumi-go-provider"
	"github.com/pulumi/pulumi-go-provider/infer"
)

// Name is the package name in type tokens (homelab:index:File).
const Name = "homelab"

// Version of the provider plugin.
const Version = "0.1.0"

// New builds the provider.
func New() (p.Provider, error) {
	return infer.NewProviderBuilder().
		WithNamespace("homelab-dev").
		WithDisplayName("homelab").
		WithDescription("Converge homelab machines to a highly available Kubernetes cluster over SSH.").
		WithConfig(infer.Config(&Config{})).
		WithResources(
			infer.Resource(&Host{}),
			infer.Resource(&File{}),
			infer.Resource(&Netplan{}),
			infer.Resource(&Service{}),
			infer.Resource(&Package{}),
			infer.Resource(&KubeadmInit{}),
			infer.Resource(&KubeadmJoin{}),
			infer.Resource(&KubeadmImages{}),
			infer.Resource(&NodeMeta{}),
			infer.Resource(&Manifest{}),
			infer.Resource(&EtcdMembers{}),
			infer.Resource(&Dataplane{}),
			infer.Resource(&ControlPlaneAddress{}),
			infer.Resource(&ControlPlaneRevival{}),
			infer.Resource(&KubernetesUpgrade{}),
			infer.Resource(&KubeletServing{}),
		).
		Build()
}

// resource is the shape of every resource here: created, read back from
// the nodes, diffed against that live state, updated in place, and
// documented in the schema.
type resource[I, O any] interface {
	infer.CustomResource[I, O]
	infer.CustomRead[I, O]
	infer.CustomDiff[I, O]
	infer.CustomUpdate[I, O]
	infer.Annotated
}

// removable is a resource whose removal acts on the nodes (or decides not
// to, saying why): without a Delete, removal only drops it from the state.
type removable[I, O any] interface {
	resource[I, O]
	infer.CustomDelete[O]
}

// Each resource's shape, checked by the compiler: a method whose signature
// drifted would otherwise compile and silently fall back to infer's
// default (for Read: no live state at all; for Configure: no consent ever
// read).
var (
	_ infer.CustomConfigure = (*Config)(nil)
	_ infer.Annotated       = (*Config)(nil)

	// Host changes nothing on a node: there is nothing to undo.
	_ resource[HostArgs, HostState] = (*Host)(nil)
	// A departing control-plane node's member goes with its KubeadmJoin's
	// delete; the list itself has nothing to undo.
	_ resource[EtcdMembersArgs, EtcdMembersState] = (*EtcdMembers)(nil)
	// Images are a cache: removal leaves them to the node's reset and
	// the kubelet's garbage collection.
	_ resource[KubeadmImagesArgs, KubeadmImagesState] = (*KubeadmImages)(nil)

	_ removable[FileArgs, FileState]                               = (*File)(nil)
	_ removable[NetplanArgs, NetplanState]                         = (*Netplan)(nil)
	_ removable[ServiceArgs, ServiceState]                         = (*Service)(nil)
	_ removable[PackageArgs, PackageState]                         = (*Package)(nil)
	_ removable[KubeadmInitArgs, KubeadmInitState]                 = (*KubeadmInit)(nil)
	_ removable[KubeadmJoinArgs, KubeadmJoinState]                 = (*KubeadmJoin)(nil)
	_ removable[NodeMetaArgs, NodeMetaState]                       = (*NodeMeta)(nil)
	_ removable[ManifestArgs, ManifestState]                       = (*Manifest)(nil)
	_ removable[DataplaneArgs, DataplaneState]                     = (*Dataplane)(nil)
	_ removable[ControlPlaneAddressArgs, ControlPlaneAddressState] = (*ControlPlaneAddress)(nil)
	_ removable[ControlPlaneRevivalArgs, ControlPlaneRevivalState] = (*ControlPlaneRevival)(nil)
	_ removable[KubernetesUpgradeArgs, KubernetesUpgradeState]     = (*KubernetesUpgrade)(nil)
	_ removable[KubeletServingArgs, KubeletServingState]           = (*KubeletServing)(nil)

	// The cluster's identity stays known in a preview of a config change.
	_ infer.ExplicitDependencies[KubeadmInitArgs, KubeadmInitState] = (*KubeadmInit)(nil)
)

// Serve runs the provider plugin (the engine starts it and talks gRPC).
func Serve(ctx context.Context) error {
	prov, err := New()
	if err != nil {
		return err
	}
	go exitWithParent(os.Getppid(), time.Second)
	return p.RunProvider(ctx, Name, Version, prov)
}

// exitWithParent ends the plugin once the process that started it (the
// engine, or the language host running it) is gone, as when an up is
// killed outright: nothing could record what it would still do, and a
// provider living on would overlap the next up. What runs on nodes in its
// own session (kubeadm) goes on there; the next up reads the outcome.
func exitWithParent(parent int, every time.Duration) {
	for range time.Tick(every) {
		if os.Getppid() != parent {
			fmt.Fprintf(os.Stderr, "the engine that started this provider (PID %d) is gone: exiting; node steps in their own session go on\n", parent)
			os.Exit(2)
		}
	}
}
