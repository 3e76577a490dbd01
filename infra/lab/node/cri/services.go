package cri

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/homelab-dev/homelab/infra/lab/node/kubelet/staticpod"
)

type server struct {
	c       Config
	started time.Time
	mu      sync.Mutex
	images  map[string]bool // pulled, besides the sandbox image
}

func newServer(c Config) *server {
	return &server{c: c, started: time.Now(), images: map[string]bool{}}
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

func (r *runtimeService) Status(_ context.Context, req *runtimeapi.StatusRequest) (*runtimeapi.StatusResponse, error) {
	resp := &runtimeapi.StatusResponse{Status: &runtimeapi.RuntimeStatus{Conditions: []*runtimeapi.RuntimeCondition{
		{Type: runtimeapi.RuntimeReady, Status: true},
		{Type: runtimeapi.NetworkReady, Status: true},
	}}}
	if req.GetVerbose() {
		// kubeadm's preflight reads the sandbox image from here.
		cfg, _ := json.Marshal(map[string]any{"sandboxImage": r.s.c.SandboxImage})
		resp.Info = map[string]string{"config": string(cfg)}
	}
	return resp, nil
}

func (r *runtimeService) RuntimeConfig(context.Context, *runtimeapi.RuntimeConfigRequest) (*runtimeapi.RuntimeConfigResponse, error) {
	return &runtimeapi.RuntimeConfigResponse{Linux: &runtimeapi.LinuxRuntimeConfiguration{CgroupDriver: runtimeapi.CgroupDriver_SYSTEMD}}, nil
}

func (r *runtimeService) UpdateRuntimeConfig(context.Context, *runtimeapi.UpdateRuntimeConfigRequest) (*runtimeapi.UpdateRuntimeConfigResponse, error) {
	return &runtimeapi.UpdateRuntimeConfigResponse{}, nil
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
	return resp, nil
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
	names := []string{i.s.c.SandboxImage}
	for n := range i.s.images {
		if n != i.s.c.SandboxImage {
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
		if n == i.s.c.SandboxImage {
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
	return &runtimeapi.ImageStatusResponse{Image: image(ref)}, nil
}

func (i *imageService) PullImage(_ context.Context, req *runtimeapi.PullImageRequest) (*runtimeapi.PullImageResponse, error) {
	ref := req.GetImage().GetImage()
	if ref == "" {
		return nil, status.Error(codes.InvalidArgument, "no image given")
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
