package provider

import (
	"context"
	"slices"
	"strings"

	p "github.com/pulumi/pulumi-go-provider"
	"github.com/pulumi/pulumi-go-provider/infer"

	"github.com/homelab-dev/homelab/infra/scripts"
)

// KubeadmImages pulls, on a control-plane node, the images its kubeadm
// init or join would pull in its preflight. Control-plane nodes join one
// at a time, and a join that pulls its own images holds every later one
// up (on real lab nodes: 17 of cp-2's 52 s, docs/benchmarks.md). Pulled
// before, they come in while the bootstrap node bootstraps, and the join
// only starts them.
//
// The images are a cache, not a state to keep: kubeadm and the kubelet
// pull whatever is missing themselves. So Read asks the node nothing, a
// new Kubernetes version pulls again, and removal leaves the images to
// the node's reset and the kubelet's image garbage collection.
type KubeadmImages struct{}

type KubeadmImagesArgs struct {
	Connection Connection `pulumi:"connection"`
	// ConfigPath is the node's kubeadm init configuration, which names
	// the version and so the images.
	ConfigPath        string   `pulumi:"configPath"`
	KubernetesVersion string   `pulumi:"kubernetesVersion"`
	IgnorePreflight   []string `pulumi:"ignorePreflight,optional"`
}

type KubeadmImagesState struct {
	KubeadmImagesArgs
	// Pulled is what kubeadm said it pulled; empty when the pull was left
	// to kubeadm (ImagePull in ignorePreflight).
	Pulled []string `pulumi:"pulled"`
}

func (k *KubeadmImages) Annotate(a infer.Annotator) {
	a.Describe(&k, "The images kubeadm runs on a control-plane node, pulled before its init or join, so the one-at-a-time control-plane joins only start them.")
	a.SetToken("index", "KubeadmImages")
}

type imagesPullArgs struct{ Config string }

func imagesPull(config string) scripts.Script {
	return scripts.Render("kubeadm/images-pull", imagesPullArgs{Config: config})
}

// leftToKubeadm: a user who told kubeadm's preflight to ignore its image
// pull (images loaded by hand under other names, a runtime kubeadm cannot
// pull with) gets no pull from us either.
func (a KubeadmImagesArgs) leftToKubeadm() bool {
	return slices.ContainsFunc(a.IgnorePreflight, func(s string) bool {
		return strings.EqualFold(s, "ImagePull") || strings.EqualFold(s, "all")
	})
}

func pullImages(ctx context.Context, in KubeadmImagesArgs) (KubeadmImagesState, error) {
	st := KubeadmImagesState{KubeadmImagesArgs: in, Pulled: []string{}}
	if in.leftToKubeadm() {
		return st, nil
	}
	c, err := dial(ctx, in.Connection)
	if err != nil {
		return st, err
	}
	defer c.Close()
	p.GetLogger(ctx).Infof("pulling the control plane's images for %s", in.KubernetesVersion)
	out, err := must(ctx, c, in.Connection.Node, "pulling kubeadm's images for "+in.KubernetesVersion, imagesPull(in.ConfigPath))
	if err != nil {
		return st, err
	}
	st.Pulled = pulledImages(out)
	return st, nil
}

// pulledImages reads kubeadm's "[config/images] Pulled IMAGE" lines.
func pulledImages(out string) []string {
	images := []string{}
	for line := range strings.Lines(out) {
		if image, ok := strings.CutPrefix(strings.TrimSpace(line), "[config/images] Pulled "); ok {
			images = append(images, image)
		}
	}
	return images
}

func (KubeadmImages) Create(ctx context.Context, req infer.CreateRequest[KubeadmImagesArgs]) (infer.CreateResponse[KubeadmImagesState], error) {
	id := req.Inputs.Connection.Node + ":kubeadm-images"
	if req.DryRun {
		return infer.CreateResponse[KubeadmImagesState]{ID: id, Output: KubeadmImagesState{KubeadmImagesArgs: req.Inputs}}, nil
	}
	st, err := pullImages(ctx, req.Inputs)
	return infer.CreateResponse[KubeadmImagesState]{ID: id, Output: st}, err
}

// Read keeps the state: see KubeadmImages.
func (KubeadmImages) Read(ctx context.Context, req infer.ReadRequest[KubeadmImagesArgs, KubeadmImagesState]) (infer.ReadResponse[KubeadmImagesArgs, KubeadmImagesState], error) {
	return infer.ReadResponse[KubeadmImagesArgs, KubeadmImagesState]{ID: req.ID, Inputs: req.Inputs, State: req.State}, nil
}

// kubeadmImagesChanges: a new version (or the pull no longer left to
// kubeadm) pulls again; a new connection, path or other preflight
// exception alone pulls nothing.
func kubeadmImagesChanges(in KubeadmImagesArgs, st KubeadmImagesState) changeSet {
	d := changeSet{}
	if in.Connection.Node != st.Connection.Node {
		d.replace("connection")
	}
	if in.KubernetesVersion != st.KubernetesVersion {
		d.update("kubernetesVersion")
	}
	if st.leftToKubeadm() && !in.leftToKubeadm() {
		d.update("ignorePreflight")
	}
	return d
}

func (KubeadmImages) Diff(ctx context.Context, req infer.DiffRequest[KubeadmImagesArgs, KubeadmImagesState]) (infer.DiffResponse, error) {
	return kubeadmImagesChanges(req.Inputs, req.State).diff(false), nil
}

func (KubeadmImages) Update(ctx context.Context, req infer.UpdateRequest[KubeadmImagesArgs, KubeadmImagesState]) (infer.UpdateResponse[KubeadmImagesState], error) {
	if req.DryRun || !kubeadmImagesChanges(req.Inputs, req.State).has("kubernetesVersion", "ignorePreflight") {
		return infer.UpdateResponse[KubeadmImagesState]{Output: KubeadmImagesState{KubeadmImagesArgs: req.Inputs, Pulled: req.State.Pulled}}, nil
	}
	st, err := pullImages(ctx, req.Inputs)
	return infer.UpdateResponse[KubeadmImagesState]{Output: st}, err
}
