package images

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"github.com/hashicorp/go-multierror"
)

// The annotations an OCI layout's index names an image by: the OCI
// spec's (crane and this tool's lab write the full reference; skopeo and
// others the tag alone) and containerd's (`ctr images export`).
const (
	refNameAnnotation        = "org.opencontainers.image.ref.name"
	containerdNameAnnotation = "io.containerd.image.name"
)

// Source is where Mirror reads images: OCI layouts when Layouts is set,
// else a registry serving them as a mirror does (Registry, an
// http(s)://HOST[:PORT] URL), else each image's own registry.
type Source struct {
	Registry string
	Layouts  []string
}

func (s Source) String() string {
	switch {
	case len(s.Layouts) > 0:
		return "OCI layout " + strings.Join(s.Layouts, ", ")
	case s.Registry != "":
		return s.Registry
	}
	return "each image's registry"
}

// Result counts what Mirror did.
type Result struct {
	Copied, Present int
}

// Mirror copies every image into its registry's mirror: to maps a
// registry host (registry.k8s.io, docker.io) to a mirror's URL,
// http(s)://HOST[:PORT] as cluster.registry names them. An image lands
// under its repository path without the registry's host, where containerd
// asks a mirror for it (registry.k8s.io/etcd:3.6.5-0 is the mirror's
// etcd:3.6.5-0). An image already there with the same digest is left
// alone; one pinned by digest must arrive with that digest. It goes on
// past a failed image and returns every failure at once.
func Mirror(ctx context.Context, imgs []Image, src Source, to map[string]string, logf func(string, ...any)) (Result, error) {
	var res Result
	var from *mirrorRegistry
	var err error
	if src.Registry != "" && len(src.Layouts) == 0 {
		if from, err = registryOf(src.Registry); err != nil {
			return res, fmt.Errorf("--from: %w", err)
		}
	}
	var layouts []layout.Path
	for _, dir := range src.Layouts {
		p, err := layout.FromPath(dir)
		if err != nil {
			return res, fmt.Errorf("--from-layout %s: not an OCI layout: %w", dir, err)
		}
		layouts = append(layouts, p)
	}
	var errs *multierror.Error
	for _, img := range imgs {
		copied, err := mirrorOne(ctx, img.Ref, layouts, from, to)
		switch {
		case err != nil:
			errs = multierror.Append(errs, fmt.Errorf("%s (for %s): %w", img.Ref, img.For, err))
		case copied:
			res.Copied++
			logf("copied %s", img.Ref)
		default:
			res.Present++
			logf("already there: %s", img.Ref)
		}
	}
	return res, errs.ErrorOrNil()
}

// CheckURL is nil for a URL Mirror can write to.
func CheckURL(raw string) error {
	_, err := registryOf(raw)
	return err
}

// RegistryOf is the registry host an image reference pulls from, as
// containerd's certs.d names it (docker.io for Docker Hub).
func RegistryOf(ref string) (string, error) {
	base, _, _ := strings.Cut(ref, "@")
	r, err := name.ParseReference(base)
	if err != nil {
		return "", err
	}
	if h := r.Context().RegistryStr(); h != name.DefaultRegistry {
		return h, nil
	}
	return "docker.io", nil
}

// mirrorRegistry is a registry reached at a URL, http meaning no TLS.
type mirrorRegistry struct {
	host string
	opts []name.Option
}

func registryOf(raw string) (*mirrorRegistry, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") {
		return nil, fmt.Errorf("%q is not a registry URL; want http(s)://HOST[:PORT], as cluster.registry.mirror", raw)
	}
	m := &mirrorRegistry{host: u.Host, opts: []name.Option{name.StrictValidation}}
	if u.Scheme == "http" {
		m.opts = append(m.opts, name.Insecure)
	}
	return m, nil
}

// at is ref's repository (and tag or digest) in this registry.
func (m *mirrorRegistry) at(ref name.Reference) (name.Reference, error) {
	s := m.host + "/" + ref.Context().RepositoryStr()
	if d, ok := ref.(name.Digest); ok {
		return name.NewDigest(s+"@"+d.DigestStr(), m.opts...)
	}
	return name.NewTag(s+":"+ref.Identifier(), m.opts...)
}

// pinned splits "repo:tag@sha256:..." (as charts pin images) into the tag
// to write and the digest it must have; a plain tag or digest has one.
func pinned(raw string) (tag name.Reference, want string, err error) {
	ref, err := name.ParseReference(raw, name.StrictValidation)
	if err != nil {
		return nil, "", err
	}
	d, ok := ref.(name.Digest)
	if !ok {
		return ref, "", nil
	}
	base, _, _ := strings.Cut(raw, "@")
	if t, err := name.NewTag(base, name.StrictValidation); err == nil && strings.Contains(base[strings.LastIndex(base, "/")+1:], ":") {
		return t, d.DigestStr(), nil
	}
	return d, d.DigestStr(), nil
}

// image is an image or an index, as found at the source.
type image interface {
	remote.Taggable
	Digest() (v1.Hash, error)
}

func mirrorOne(ctx context.Context, raw string, layouts []layout.Path, from *mirrorRegistry, to map[string]string) (bool, error) {
	ref, want, err := pinned(raw)
	if err != nil {
		return false, err
	}
	host, err := RegistryOf(raw)
	if err != nil {
		return false, err
	}
	url, ok := to[host]
	if !ok {
		return false, fmt.Errorf("no mirror of %s is declared (cluster.registry.mirror or mirrors[%q]; or --to URL)", host, host)
	}
	dst, err := registryOf(url)
	if err != nil {
		return false, fmt.Errorf("the mirror of %s: %w", host, err)
	}
	var img image
	switch {
	case len(layouts) > 0:
		img, err = fromLayouts(layouts, raw, ref, want)
	case from != nil:
		var at name.Reference
		if at, err = from.at(ref); err == nil {
			img, err = fetch(ctx, at)
		}
	default:
		img, err = fetch(ctx, ref, remote.WithAuthFromKeychain(authn.DefaultKeychain))
	}
	if err != nil {
		return false, err
	}
	got, err := img.Digest()
	if err != nil {
		return false, err
	}
	if want != "" && got.String() != want {
		return false, fmt.Errorf("the source has digest %s, the reference pins %s", got, want)
	}
	target, err := dst.at(ref)
	if err != nil {
		return false, err
	}
	if d, err := remote.Head(target, remote.WithContext(ctx)); err == nil && d.Digest == got {
		return false, nil
	} else if err != nil && !notFound(err) {
		return false, fmt.Errorf("the mirror: %w", err)
	}
	switch i := img.(type) {
	case v1.ImageIndex:
		err = remote.WriteIndex(target, i, remote.WithContext(ctx))
	case v1.Image:
		err = remote.Write(target, i, remote.WithContext(ctx))
	}
	if err != nil {
		return false, fmt.Errorf("writing %s: %w", target, err)
	}
	return true, nil
}

func fetch(ctx context.Context, ref name.Reference, opts ...remote.Option) (image, error) {
	desc, err := remote.Get(ref, append(opts, remote.WithContext(ctx))...)
	if err != nil {
		return nil, err
	}
	if desc.MediaType.IsIndex() {
		return desc.ImageIndex()
	}
	return desc.Image()
}

// fromLayouts finds the image in the layouts' indexes: by its full name,
// its tag alone (when that is unambiguous), or the digest it is pinned to.
func fromLayouts(layouts []layout.Path, raw string, ref name.Reference, want string) (image, error) {
	base, _, _ := strings.Cut(raw, "@")
	var byTag []func() (image, error)
	for _, p := range layouts {
		idx, err := p.ImageIndex()
		if err != nil {
			return nil, err
		}
		im, err := idx.IndexManifest()
		if err != nil {
			return nil, err
		}
		for _, d := range im.Manifests {
			open := func() (image, error) {
				if d.MediaType.IsIndex() {
					return idx.ImageIndex(d.Digest)
				}
				return idx.Image(d.Digest)
			}
			n := d.Annotations[refNameAnnotation]
			switch {
			case n == raw || n == base || d.Annotations[containerdNameAnnotation] == raw || d.Annotations[containerdNameAnnotation] == base ||
				(want != "" && d.Digest.String() == want):
				return open()
			case n == ref.Identifier() && n != "":
				byTag = append(byTag, open)
			}
		}
	}
	if len(byTag) == 1 {
		return byTag[0]()
	}
	return nil, errors.New("not in the OCI layout (its index names no image by this reference)")
}

func notFound(err error) bool {
	var te *transport.Error
	return errors.As(err, &te) && te.StatusCode == 404
}
