package cri

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/homelab-dev/homelab/infra/cniconf"
	"github.com/homelab-dev/homelab/infra/lab/standin/kubelet/staticpod"
)

type server struct {
	c       Config
	rc      RuntimeConfig
	started time.Time
	// mu guards images and serialises address allocation.
	mu     sync.Mutex
	images map[string]bool // pulled, besides the sandbox image
}

func newServer(c Config, rc RuntimeConfig) *server {
	return &server{c: c, rc: rc, started: time.Now(), images: map[string]bool{}}
}

func (s *server) runtimeConfig() RuntimeConfig { return s.rc }

func (rc RuntimeConfig) handlers() []string {
	var out []string
	for h := range rc.Runtimes {
		out = append(out, h)
	}
	sort.Strings(out)
	return out
}

type runtimeService struct {
	runtimeapi.UnimplementedRuntimeServiceServer
	s *server
}

func (r *runtimeService) Version(context.Context, *runtimeapi.VersionRequest) (*runtimeapi.VersionResponse, error) {
	return &runtimeapi.VersionResponse{
		Version:           "0.1.0",
		RuntimeName:       RuntimeName,
		RuntimeVersion:    RuntimeVersion,
		RuntimeApiVersion: "v1",
	}, nil
}

// Status reports the runtime ready and the network as containerd's CRI
// plugin does: ready once the CNI directory yields a network.
func (r *runtimeService) Status(_ context.Context, req *runtimeapi.StatusRequest) (*runtimeapi.StatusResponse, error) {
	rc := r.s.runtimeConfig()
	_, loadErr := cniconf.Load(rc.CNIConfDir)
	network := &runtimeapi.RuntimeCondition{Type: runtimeapi.NetworkReady, Status: true}
	if loadErr != nil {
		network.Status, network.Reason, network.Message = false, cniconf.NotReadyReason, cniconf.NotReadyMessage
	}
	resp := &runtimeapi.StatusResponse{Status: &runtimeapi.RuntimeStatus{Conditions: []*runtimeapi.RuntimeCondition{
		{Type: runtimeapi.RuntimeReady, Status: true},
		network,
	}}}
	for _, h := range rc.handlers() {
		resp.RuntimeHandlers = append(resp.RuntimeHandlers, &runtimeapi.RuntimeHandler{Name: h})
	}
	if req.GetVerbose() {
		resp.Info = verboseInfo(rc, loadErr)
	}
	return resp, nil
}

// verboseInfo is containerd's `crictl info`: the CRI configuration (kubeadm's
// preflight reads the sandbox image from it; the kubelet stand-in nothing)
// and the last CNI load's result.
func verboseInfo(rc RuntimeConfig, loadErr error) map[string]string {
	cfg, _ := json.Marshal(map[string]any{
		"sandboxImage": rc.SandboxImage,
		"containerd":   map[string]any{"defaultRuntimeName": rc.DefaultRuntime, "runtimes": rc.Runtimes},
		"cni":          map[string]any{"confDir": rc.CNIConfDir, "binDirs": rc.CNIBinDirs, "maxConfNum": 1},
	})
	status := "OK"
	if loadErr != nil {
		status = "cni config load failed: " + loadErr.Error()
	}
	last, _ := json.Marshal(status)
	return map[string]string{"config": string(cfg), "lastCNILoadStatus": string(last)}
}

// RuntimeConfig answers, as containerd 2 does, the default runtime's
// cgroup driver from the configuration.
func (r *runtimeService) RuntimeConfig(context.Context, *runtimeapi.RuntimeConfigRequest) (*runtimeapi.RuntimeConfigResponse, error) {
	rc := r.s.runtimeConfig()
	driver := runtimeapi.CgroupDriver_CGROUPFS
	if rc.Runtimes[rc.DefaultRuntime].SystemdCgroup {
		driver = runtimeapi.CgroupDriver_SYSTEMD
	}
	return &runtimeapi.RuntimeConfigResponse{Linux: &runtimeapi.LinuxRuntimeConfiguration{CgroupDriver: driver}}, nil
}

// UpdateRuntimeConfig takes the node's pod CIDR, which the kubelet passes
// on once the controller-manager assigned it: pod addresses come from it.
func (r *runtimeService) UpdateRuntimeConfig(_ context.Context, req *runtimeapi.UpdateRuntimeConfigRequest) (*runtimeapi.UpdateRuntimeConfigResponse, error) {
	cidr := req.GetRuntimeConfig().GetNetworkConfig().GetPodCidr()
	if cidr != "" && cidr != r.s.podCIDR() {
		if err := os.MkdirAll(filepath.Dir(r.s.podCIDRPath()), 0o700); err != nil {
			return nil, status.Error(codes.Internal, err.Error())
		}
		if err := os.WriteFile(r.s.podCIDRPath(), []byte(cidr+"\n"), 0o600); err != nil {
			return nil, status.Error(codes.Internal, err.Error())
		}
		r.s.c.Logf("pod CIDR %s", cidr)
	}
	return &runtimeapi.UpdateRuntimeConfigResponse{}, nil
}

// RunPodSandbox sets up a sandbox for a pod of the API, or fails as
// containerd would (see runPodSandbox).
func (r *runtimeService) RunPodSandbox(_ context.Context, req *runtimeapi.RunPodSandboxRequest) (*runtimeapi.RunPodSandboxResponse, error) {
	sb, err := r.s.runPodSandbox(req)
	if err != nil {
		return nil, status.Error(codes.Unknown, err.Error())
	}
	r.s.c.Logf("sandbox %s for pod %s/%s (%s)", sb.ID[:12], sb.Namespace, sb.Name, sandboxNet(sb))
	return &runtimeapi.RunPodSandboxResponse{PodSandboxId: sb.ID}, nil
}

func sandboxNet(sb podSandbox) string {
	if sb.HostNetwork {
		return "host network"
	}
	return "network " + sb.Network + ", " + sb.IP
}

// sandbox is a static pod process presented as a pod sandbox.
type sandbox struct {
	id  string
	rec staticpod.Record
}

func (r *runtimeService) sandboxes() []sandbox {
	recs, err := staticpod.LoadRecords(r.s.c.PodStateDir)
	if err != nil {
		r.s.c.Logf("reading %s: %v", r.s.c.PodStateDir, err)
	}
	var out []sandbox
	for _, rec := range recs {
		if !rec.Alive() {
			continue
		}
		sum := sha256.Sum256(fmt.Appendf(nil, "%s/%d/%d", rec.Name, rec.PID, rec.StartTime))
		out = append(out, sandbox{id: hex.EncodeToString(sum[:]), rec: rec})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].rec.Name < out[j].rec.Name })
	return out
}

func (r *runtimeService) find(id string) (sandbox, bool) {
	for _, sb := range r.sandboxes() {
		// crictl accepts unique prefixes; so do we.
		if id != "" && strings.HasPrefix(sb.id, id) {
			return sb, true
		}
	}
	return sandbox{}, false
}

func (sb sandbox) metadata() *runtimeapi.PodSandboxMetadata {
	return &runtimeapi.PodSandboxMetadata{Name: sb.rec.Name, Uid: sb.id[:32], Namespace: "kube-system"}
}

func (sb sandbox) labels() map[string]string {
	return map[string]string{
		"io.kubernetes.pod.name":      sb.rec.Name,
		"io.kubernetes.pod.namespace": "kube-system",
	}
}

func (r *runtimeService) ListPodSandbox(_ context.Context, req *runtimeapi.ListPodSandboxRequest) (*runtimeapi.ListPodSandboxResponse, error) {
	f := req.GetFilter()
	resp := &runtimeapi.ListPodSandboxResponse{}
	for _, sb := range r.sandboxes() {
		if f.GetId() != "" && !strings.HasPrefix(sb.id, f.GetId()) {
			continue
		}
		if f.GetState() != nil && f.GetState().GetState() != runtimeapi.PodSandboxState_SANDBOX_READY {
			continue
		}
		if !matches(sb.labels(), f.GetLabelSelector()) {
			continue
		}
		resp.Items = append(resp.Items, &runtimeapi.PodSandbox{
			Id:        sb.id,
			Metadata:  sb.metadata(),
			State:     runtimeapi.PodSandboxState_SANDBOX_READY,
			CreatedAt: sb.rec.Started.UnixNano(),
			Labels:    sb.labels(),
		})
	}
	for _, sb := range r.s.podSandboxes() {
		if f.GetId() != "" && !strings.HasPrefix(sb.ID, f.GetId()) {
			continue
		}
		if f.GetState() != nil && f.GetState().GetState() != sb.state() {
			continue
		}
		if !matches(sb.Labels, f.GetLabelSelector()) {
			continue
		}
		resp.Items = append(resp.Items, &runtimeapi.PodSandbox{
			Id:             sb.ID,
			Metadata:       sb.metadata(),
			State:          sb.state(),
			CreatedAt:      sb.Created.UnixNano(),
			Labels:         sb.Labels,
			Annotations:    sb.Annotations,
			RuntimeHandler: sb.Handler,
		})
	}
	return resp, nil
}

func (sb podSandbox) state() runtimeapi.PodSandboxState {
	if sb.Stopped {
		return runtimeapi.PodSandboxState_SANDBOX_NOTREADY
	}
	return runtimeapi.PodSandboxState_SANDBOX_READY
}

func (sb podSandbox) metadata() *runtimeapi.PodSandboxMetadata {
	return &runtimeapi.PodSandboxMetadata{Name: sb.Name, Uid: sb.UID, Namespace: sb.Namespace, Attempt: sb.Attempt}
}

func (sb podSandbox) status() *runtimeapi.PodSandboxStatus {
	mode := runtimeapi.NamespaceMode_POD
	if sb.HostNetwork {
		mode = runtimeapi.NamespaceMode_NODE
	}
	st := &runtimeapi.PodSandboxStatus{
		Id:             sb.ID,
		Metadata:       sb.metadata(),
		State:          sb.state(),
		CreatedAt:      sb.Created.UnixNano(),
		Labels:         sb.Labels,
		Annotations:    sb.Annotations,
		RuntimeHandler: sb.Handler,
		Linux: &runtimeapi.LinuxPodSandboxStatus{Namespaces: &runtimeapi.Namespace{Options: &runtimeapi.NamespaceOption{
			Network: mode, Pid: runtimeapi.NamespaceMode_CONTAINER, Ipc: runtimeapi.NamespaceMode_POD,
		}}},
	}
	if sb.IP != "" && !sb.Stopped {
		st.Network = &runtimeapi.PodSandboxNetworkStatus{Ip: sb.IP}
	}
	return st
}

func matches(labels, selector map[string]string) bool {
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}

func (r *runtimeService) PodSandboxStatus(_ context.Context, req *runtimeapi.PodSandboxStatusRequest) (*runtimeapi.PodSandboxStatusResponse, error) {
	if psb, ok := r.s.findPodSandbox(req.GetPodSandboxId()); ok {
		return &runtimeapi.PodSandboxStatusResponse{Status: psb.status()}, nil
	}
	sb, ok := r.find(req.GetPodSandboxId())
	if !ok {
		return nil, status.Errorf(codes.NotFound, "pod sandbox %q not found", req.GetPodSandboxId())
	}
	return &runtimeapi.PodSandboxStatusResponse{Status: &runtimeapi.PodSandboxStatus{
		Id:        sb.id,
		Metadata:  sb.metadata(),
		State:     runtimeapi.PodSandboxState_SANDBOX_READY,
		CreatedAt: sb.rec.Started.UnixNano(),
		Labels:    sb.labels(),
		Linux: &runtimeapi.LinuxPodSandboxStatus{Namespaces: &runtimeapi.Namespace{Options: &runtimeapi.NamespaceOption{
			Network: runtimeapi.NamespaceMode_NODE, Pid: runtimeapi.NamespaceMode_NODE, Ipc: runtimeapi.NamespaceMode_NODE,
		}}},
	}}, nil
}

// StopPodSandbox ends the static pod's process. This is how `kubeadm reset`
// (which stops the kubelet first) takes the control plane of a node down.
func (r *runtimeService) StopPodSandbox(ctx context.Context, req *runtimeapi.StopPodSandboxRequest) (*runtimeapi.StopPodSandboxResponse, error) {
	if psb, ok := r.s.findPodSandbox(req.GetPodSandboxId()); ok {
		// Its network torn down: the address is free again.
		psb.Stopped = true
		if err := r.s.saveSandbox(psb); err != nil {
			return nil, status.Error(codes.Internal, err.Error())
		}
		return &runtimeapi.StopPodSandboxResponse{}, nil
	}
	if sb, ok := r.find(req.GetPodSandboxId()); ok {
		r.s.c.Logf("stopping pod sandbox %s (%s, pid %d)", sb.id[:12], sb.rec.Name, sb.rec.PID)
		sb.rec.Stop(r.grace(ctx))
	}
	return &runtimeapi.StopPodSandboxResponse{}, nil
}

// grace fits SIGTERM-to-SIGKILL into the caller's deadline: kubeadm gives
// CRI calls 2 s and would otherwise time out and retry while a process
// shuts down.
func (r *runtimeService) grace(ctx context.Context) time.Duration {
	g := r.s.c.StopGrace
	if dl, ok := ctx.Deadline(); ok {
		g = min(g, time.Until(dl)/2)
	}
	return max(g, 0)
}

func (r *runtimeService) RemovePodSandbox(ctx context.Context, req *runtimeapi.RemovePodSandboxRequest) (*runtimeapi.RemovePodSandboxResponse, error) {
	if psb, ok := r.s.findPodSandbox(req.GetPodSandboxId()); ok {
		if err := os.Remove(r.s.sandboxPath(psb.ID)); err != nil && !os.IsNotExist(err) {
			return nil, status.Error(codes.Internal, err.Error())
		}
		return &runtimeapi.RemovePodSandboxResponse{}, nil
	}
	if sb, ok := r.find(req.GetPodSandboxId()); ok {
		sb.rec.Stop(r.grace(ctx))
		if err := staticpod.RemoveRecord(r.s.c.PodStateDir, sb.rec.Name); err != nil {
			return nil, status.Error(codes.Internal, err.Error())
		}
	}
	return &runtimeapi.RemovePodSandboxResponse{}, nil
}

func (r *runtimeService) ListContainers(context.Context, *runtimeapi.ListContainersRequest) (*runtimeapi.ListContainersResponse, error) {
	return &runtimeapi.ListContainersResponse{}, nil
}

func (r *runtimeService) ContainerStatus(_ context.Context, req *runtimeapi.ContainerStatusRequest) (*runtimeapi.ContainerStatusResponse, error) {
	return nil, status.Errorf(codes.NotFound, "container %q not found", req.GetContainerId())
}

func (r *runtimeService) StopContainer(context.Context, *runtimeapi.StopContainerRequest) (*runtimeapi.StopContainerResponse, error) {
	return &runtimeapi.StopContainerResponse{}, nil
}

func (r *runtimeService) RemoveContainer(context.Context, *runtimeapi.RemoveContainerRequest) (*runtimeapi.RemoveContainerResponse, error) {
	return &runtimeapi.RemoveContainerResponse{}, nil
}

func (r *runtimeService) ContainerStats(context.Context, *runtimeapi.ContainerStatsRequest) (*runtimeapi.ContainerStatsResponse, error) {
	return &runtimeapi.ContainerStatsResponse{}, nil
}

func (r *runtimeService) ListContainerStats(context.Context, *runtimeapi.ListContainerStatsRequest) (*runtimeapi.ListContainerStatsResponse, error) {
	return &runtimeapi.ListContainerStatsResponse{}, nil
}

func (r *runtimeService) ListPodSandboxStats(context.Context, *runtimeapi.ListPodSandboxStatsRequest) (*runtimeapi.ListPodSandboxStatsResponse, error) {
	return &runtimeapi.ListPodSandboxStatsResponse{}, nil
}

func (r *runtimeService) ListMetricDescriptors(context.Context, *runtimeapi.ListMetricDescriptorsRequest) (*runtimeapi.ListMetricDescriptorsResponse, error) {
	return &runtimeapi.ListMetricDescriptorsResponse{}, nil
}

func (r *runtimeService) ListPodSandboxMetrics(context.Context, *runtimeapi.ListPodSandboxMetricsRequest) (*runtimeapi.ListPodSandboxMetricsResponse, error) {
	return &runtimeapi.ListPodSandboxMetricsResponse{}, nil
}

// GetContainerEvents has nothing to send: no container ever changes.
func (r *runtimeService) GetContainerEvents(_ *runtimeapi.GetEventsRequest, stream grpc.ServerStreamingServer[runtimeapi.ContainerEventResponse]) error {
	<-stream.Context().Done()
	return nil
}

type imageService struct {
	runtimeapi.UnimplementedImageServiceServer
	s *server
}

// image makes up a stable description of any image: every image is present.
func image(ref string) *runtimeapi.Image {
	name := ref
	digestless, _, hasDigest := strings.Cut(name, "@")
	if !hasDigest && !strings.Contains(path.Base(name), ":") {
		name += ":latest"
	}
	sum := sha256.Sum256([]byte(name))
	id := "sha256:" + hex.EncodeToString(sum[:])
	repo := digestless
	if i := strings.LastIndex(repo, ":"); i > strings.LastIndex(repo, "/") {
		repo = repo[:i]
	}
	img := &runtimeapi.Image{
		Id:          id,
		RepoDigests: []string{repo + "@" + id},
		Size:        10<<20 + uint64(sum[0])<<18, // 10 to 74 MiB
		Spec:        &runtimeapi.ImageSpec{Image: name},
		Pinned:      false,
	}
	if !hasDigest {
		img.RepoTags = []string{name}
	}
	return img
}

func (i *imageService) ListImages(_ context.Context, req *runtimeapi.ListImagesRequest) (*runtimeapi.ListImagesResponse, error) {
	i.s.mu.Lock()
	names := []string{i.s.rc.SandboxImage}
	for n := range i.s.images {
		if n != i.s.rc.SandboxImage {
			names = append(names, n)
		}
	}
	i.s.mu.Unlock()
	sort.Strings(names[1:])
	resp := &runtimeapi.ListImagesResponse{}
	want := req.GetFilter().GetImage().GetImage()
	for _, n := range names {
		img := image(n)
		if want != "" && want != n && img.Id != image(want).Id {
			continue
		}
		if n == i.s.rc.SandboxImage {
			img.Pinned = true
		}
		resp.Images = append(resp.Images, img)
	}
	return resp, nil
}

func (i *imageService) ImageStatus(_ context.Context, req *runtimeapi.ImageStatusRequest) (*runtimeapi.ImageStatusResponse, error) {
	ref := req.GetImage().GetImage()
	if ref == "" {
		return nil, status.Error(codes.InvalidArgument, "no image given")
	}
	if !i.s.pullable(ref) {
		// What the CRI answers for an image it does not have: no image.
		return &runtimeapi.ImageStatusResponse{}, nil
	}
	return &runtimeapi.ImageStatusResponse{Image: image(ref)}, nil
}

// pullable: the lab's image tree holds ref (every image without a tree).
func (s *server) pullable(ref string) bool {
	return s.c.Images == nil || s.c.Images.Has(ref)
}

func (i *imageService) PullImage(_ context.Context, req *runtimeapi.PullImageRequest) (*runtimeapi.PullImageResponse, error) {
	ref := req.GetImage().GetImage()
	if ref == "" {
		return nil, status.Error(codes.InvalidArgument, "no image given")
	}
	if i.s.c.Images != nil {
		if _, err := i.s.c.Images.Image(ref); err != nil {
			// containerd's words, which kubeadm's preflight prints.
			return nil, status.Errorf(codes.NotFound, "failed to pull and unpack image %q: %v", ref, err)
		}
	}
	i.s.mu.Lock()
	i.s.images[image(ref).Spec.Image] = true
	i.s.mu.Unlock()
	return &runtimeapi.PullImageResponse{ImageRef: image(ref).Id}, nil
}

func (i *imageService) RemoveImage(_ context.Context, req *runtimeapi.RemoveImageRequest) (*runtimeapi.RemoveImageResponse, error) {
	ref := req.GetImage().GetImage()
	i.s.mu.Lock()
	for n := range i.s.images {
		if n == ref || image(n).Id == ref || image(n).Id == image(ref).Id {
			delete(i.s.images, n)
		}
	}
	i.s.mu.Unlock()
	return &runtimeapi.RemoveImageResponse{}, nil
}

func (i *imageService) ImageFsInfo(context.Context, *runtimeapi.ImageFsInfoRequest) (*runtimeapi.ImageFsInfoResponse, error) {
	now := time.Now().UnixNano()
	// Report what the images would take, bounded by what the disk has.
	var used uint64
	imgs, _ := i.ListImages(context.Background(), &runtimeapi.ListImagesRequest{})
	for _, img := range imgs.Images {
		used += img.Size
	}
	var st syscall.Statfs_t
	dir := i.s.c.ImageFSDir
	for syscall.Statfs(dir, &st) != nil && dir != "/" {
		dir = path.Dir(dir)
	}
	if total := st.Blocks * uint64(st.Bsize); total > 0 && used > total {
		used = total
	}
	fs := func(mount string) *runtimeapi.FilesystemUsage {
		return &runtimeapi.FilesystemUsage{
			Timestamp:  now,
			FsId:       &runtimeapi.FilesystemIdentifier{Mountpoint: mount},
			UsedBytes:  &runtimeapi.UInt64Value{Value: used},
			InodesUsed: &runtimeapi.UInt64Value{Value: used / (64 << 10)},
		}
	}
	return &runtimeapi.ImageFsInfoResponse{
		ImageFilesystems:     []*runtimeapi.FilesystemUsage{fs(path.Join(i.s.c.ImageFSDir, "io.containerd.snapshotter.v1.overlayfs"))},
		ContainerFilesystems: []*runtimeapi.FilesystemUsage{fs(path.Join(i.s.c.ImageFSDir, "io.containerd.snapshotter.v1.overlayfs"))},
	}, nil
}
