package program

import (
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
)

// Client-side handles of the provider's resources (what a generated SDK
// would hold), named XHandle so that they are never taken for the
// provider's X (its Args and State). Arguments go as pulumi.Map, whose keys
// TestInputsMatchTheProvider holds to the provider's input names.

const pkg = "homelab:index:"

type HostHandle struct {
	pulumi.CustomResourceState
	Hostname  pulumi.StringOutput      `pulumi:"hostname"`
	Addresses pulumi.StringArrayOutput `pulumi:"addresses"`
	MACs      pulumi.StringArrayOutput `pulumi:"macs"`
	Versions  pulumi.StringMapOutput   `pulumi:"versions"`
	GPUs      pulumi.StringArrayOutput `pulumi:"gpus"`
}

type FileHandle struct {
	pulumi.CustomResourceState
	Sha256 pulumi.StringOutput `pulumi:"sha256"`
}

type NetplanHandle struct {
	pulumi.CustomResourceState
}

type ServiceHandle struct {
	pulumi.CustomResourceState
	Active pulumi.BoolOutput `pulumi:"active"`
}

type KubeadmInitHandle struct {
	pulumi.CustomResourceState
	AdminKubeconfig pulumi.StringOutput `pulumi:"adminKubeconfig"`
	ClusterUID      pulumi.StringOutput `pulumi:"clusterUID"`
}

type KubeadmJoinHandle struct {
	pulumi.CustomResourceState
	Joined pulumi.BoolOutput `pulumi:"joined"`
}

type NodeMetaHandle struct {
	pulumi.CustomResourceState
}

type ManifestHandle struct {
	pulumi.CustomResourceState
}

type EtcdMembersHandle struct {
	pulumi.CustomResourceState
	Live pulumi.MapArrayOutput `pulumi:"live"`
}

func register[T pulumi.CustomResource](ctx *pulumi.Context, kind, name string, args pulumi.Map, res T, opts ...pulumi.ResourceOption) (T, error) {
	err := ctx.RegisterResource(pkg+kind, name, args, res, opts...)
	return res, err
}

type PackageHandle struct {
	pulumi.CustomResourceState
	Status pulumi.StringOutput `pulumi:"status"`
}

type ControlPlaneAddressHandle struct {
	pulumi.CustomResourceState
}

type ControlPlaneRevivalHandle struct {
	pulumi.CustomResourceState
}

type KubernetesUpgradeHandle struct {
	pulumi.CustomResourceState
}

type KubeletServingHandle struct {
	pulumi.CustomResourceState
}

type KubeadmImagesHandle struct {
	pulumi.CustomResourceState
}
