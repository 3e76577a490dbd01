// Package registry is the emulated homelab's container registry: a real
// OCI distribution server (go-containerregistry's, the one crane and ko
// test against) in the gateway namespace, serving the images the lab
// builds (infra/lab/nodeimages) to the real nodes' containerd as the
// mirror of registry.k8s.io and quay.io, as an air-gapped homelab's own
// registry would. It is read-only: nodes pull, nothing pushes.
package registry

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	ggcr "github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"

	"github.com/homelab-dev/homelab/infra/lab/nodeimages"
)

// Port is the registry's port on the gateway address.
const Port = "5000"

// Mirrored are the registries whose images the lab serves: kubeadm's
// and Cilium's.
var Mirrored = []string{"registry.k8s.io", "quay.io"}

// Handler serves the OCI layouts at dirs: each image their indexes name
// (nodeimages.RefAnnotation) at its repository path without the
// registry's host, as a mirror is asked for it
// (registry.k8s.io/kube-apiserver is /v2/kube-apiserver/...).
func Handler(dirs []string, logs io.Writer) (http.Handler, error) {
	logger := log.New(logs, "registry: ", log.LstdFlags)
	reg := ggcr.New(ggcr.WithBlobHandler(layoutBlobs(dirs)), ggcr.Logger(logger))
	served := map[string]string{}
	for _, dir := range dirs {
		p, err := layout.FromPath(dir)
		if err != nil {
			return nil, err
		}
		idx, err := p.ImageIndex()
		if err != nil {
			return nil, err
		}
		im, err := idx.IndexManifest()
		if err != nil {
			return nil, err
		}
		for _, d := range im.Manifests {
			ref := d.Annotations[nodeimages.RefAnnotation]
			tag, err := name.NewTag(ref, name.StrictValidation)
			if err != nil {
				return nil, fmt.Errorf("%s: index entry %s: %w", dir, d.Digest, err)
			}
			path := tag.RepositoryStr() + ":" + tag.TagStr()
			if other, ok := served[path]; ok {
				return nil, fmt.Errorf("%s and %s would both be served as %s", other, ref, path)
			}
			served[path] = ref
			data, err := p.Bytes(d.Digest)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", ref, err)
			}
			// The manifest goes in through the registry's own API, in
			// this process: the blobs it names are on disk already.
			req := httptest.NewRequest(http.MethodPut, "/v2/"+tag.RepositoryStr()+"/manifests/"+tag.TagStr(), bytes.NewReader(data))
			req.Header.Set("Content-Type", string(d.MediaType))
			rec := httptest.NewRecorder()
			reg.ServeHTTP(rec, req)
			if rec.Code != http.StatusCreated {
				return nil, fmt.Errorf("%s: the registry refused its manifest: %d %s", ref, rec.Code, rec.Body)
			}
		}
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			http.Error(w, "read only", http.StatusMethodNotAllowed)
			return
		}
		reg.ServeHTTP(w, r)
	}), nil
}

// layoutBlobs finds a blob in any of the layouts. A blob is not hashed
// again when served (the layouts are written whole, then renamed into
// place); containerd checks every digest it pulls.
type layoutBlobs []string

var (
	_ ggcr.BlobHandler     = layoutBlobs(nil)
	_ ggcr.BlobStatHandler = layoutBlobs(nil)
)

func (l layoutBlobs) find(h v1.Hash) (string, os.FileInfo, error) {
	for _, dir := range l {
		p := filepath.Join(dir, "blobs", h.Algorithm, h.Hex)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() {
			return p, st, nil
		}
	}
	return "", nil, ggcr.ErrNotFound
}

func (l layoutBlobs) Stat(_ context.Context, _ string, h v1.Hash) (int64, error) {
	_, st, err := l.find(h)
	if err != nil {
		return 0, err
	}
	return st.Size(), nil
}

func (l layoutBlobs) Get(_ context.Context, _ string, h v1.Hash) (io.ReadCloser, error) {
	p, _, err := l.find(h)
	if err != nil {
		return nil, err
	}
	return os.Open(p)
}

// Serve serves the images of the layouts dirs on ln until it fails.
func Serve(ln net.Listener, dirs []string, logs io.Writer) error {
	h, err := Handler(dirs, logs)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	return srv.Serve(ln)
}
