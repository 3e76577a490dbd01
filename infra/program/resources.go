package program

import (
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
)

// Client-side handles of the provider's resources (what a generated SDK
// would hold). Arguments go as pulumi.Map, whose keys are the provider's
// input names.

const pkg = "homelab:index:"

type Host struct {
	pulumi.CustomResourceState
	Hostname  pulumi.StringOutput      `pulumi:"hostname"`
	Addresses pulumi.StringArrayOutput `pulumi:"addresses"`
	MACs      pulumi.StringArrayOutput `pulumi:"macs"`
	Versions  pulumi.StringMapOutput   `pulumi:"versions"`
	GPUs      pulumi.StringArrayOutput `pulumi:"gpus"`
}

type File struct {
	pulumi.CustomResourceState
	Sha256 pulumi.StringOutput `pulumi:"sha256"`
}

type Service struct {
	pulumi.CustomResourceState
	Active pulumi.BoolOutput `pulumi:"active"`
}

type KubeadmInit struct {
	pulumi.CustomResourceState
	AdminKubeconfig pulumi.StringOutput `pulumi:"adminKubeconfig"`
	ClusterUID      pulumi.StringOutput `pulumi:"clusterUID"`
}

type KubeadmJoin struct {
	pulumi.CustomResourceState
	Joined pulumi.BoolOutput `pulumi:"joined"`
}

type NodeMeta struct {
	pulumi.CustomResourceState
}

type Manifest struct {
	pulumi.CustomResourceState
}

type EtcdMembers struct {
	pulumi.CustomResourceState
	Live pulumi.MapArrayOutput `pulumi:"live"`
}

func register[T pulumi.CustomResource](ctx *pulumi.Context, kind, name string, args pulumi.Map, res T, opts ...pulumi.ResourceOption) (T, error) {
	err := ctx.RegisterResource(pkg+kind, name, args, res, opts...)
	return res, err
}

type Package struct {
	pulumi.CustomResourceState
	Status pulumi.StringOutput `pulumi:"status"`
}

type ControlPlaneAddress struct {
	pulumi.CustomResourceState
}
