package nodeimages

import (
	"debug/elf"
	"fmt"
	"os"
	"path"
	"strings"

	securejoin "github.com/cyphar/filepath-securejoin"
)

// libDirs are where Debian's dynamic loader looks for a library that has
// no ld.so.cache entry (an image has no cache): multiarch first.
var libDirs = []string{"/usr/lib/x86_64-linux-gnu", "/lib/x86_64-linux-gnu", "/usr/lib", "/lib"}

// FromRoot returns the files at paths of the root filesystem root (a
// Debian tree, as infra/tools/build-rootfs.sh installs it), as an image
// built from that distribution holds them: every symlink resolved inside
// root, every shared library an ELF file loads (DT_NEEDED, recursively,
// and its interpreter) at the path the loader finds it, and a path whose
// file another path already holds stored as a hard link to it. A path
// ending in "/" takes every regular file of that directory (plugins
// loaded with dlopen, which DT_NEEDED does not name).
func FromRoot(root string, paths []string) ([]File, error) {
	var out []File
	byReal := map[string]string{} // real path in root -> first image path
	var add func(p string) error
	add = func(p string) error {
		if strings.HasSuffix(p, "/") {
			dir, err := securejoin.SecureJoin(root, p)
			if err != nil {
				return err
			}
			entries, err := os.ReadDir(dir)
			if err != nil {
				return fmt.Errorf("%s in %s: %w", p, root, err)
			}
			for _, e := range entries {
				if !e.IsDir() {
					if err := add(p + e.Name()); err != nil {
						return err
					}
				}
			}
			return nil
		}
		for _, f := range out {
			if f.Path == p {
				return nil
			}
		}
		real, err := securejoin.SecureJoin(root, p)
		if err != nil {
			return err
		}
		st, err := os.Stat(real)
		if err != nil || !st.Mode().IsRegular() {
			return fmt.Errorf("%s is not a file in %s: %v", p, root, err)
		}
		if first, ok := byReal[real]; ok {
			out = append(out, File{Path: p, Link: first})
			return nil
		}
		byReal[real] = p
		out = append(out, File{Src: real, Path: p, Mode: int64(st.Mode().Perm())})
		needed, interp, err := elfNeeds(real)
		if err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		if interp != "" {
			if err := add(interp); err != nil {
				return err
			}
		}
		for _, lib := range needed {
			found := ""
			for _, d := range libDirs {
				if r, err := securejoin.SecureJoin(root, path.Join(d, lib)); err == nil {
					if _, err := os.Stat(r); err == nil {
						found = path.Join(d, lib)
						break
					}
				}
			}
			if found == "" {
				return fmt.Errorf("%s needs %s, which %s does not have", p, lib, root)
			}
			if err := add(found); err != nil {
				return err
			}
		}
		return nil
	}
	for _, p := range paths {
		if err := add(p); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// elfNeeds is what the dynamic loader loads for the file at p: nothing
// for a file that is not ELF (a script) or a static binary.
func elfNeeds(p string) (needed []string, interp string, err error) {
	f, err := elf.Open(p)
	if err != nil {
		if _, ok := err.(*elf.FormatError); ok {
			return nil, "", nil
		}
		return nil, "", err
	}
	defer f.Close()
	for _, prog := range f.Progs {
		if prog.Type == elf.PT_INTERP {
			b := make([]byte, prog.Filesz)
			if _, err := prog.ReadAt(b, 0); err != nil {
				return nil, "", err
			}
			interp = strings.TrimRight(string(b), "\x00")
		}
	}
	needed, err = f.ImportedLibraries()
	if err != nil {
		return nil, "", err
	}
	return needed, interp, nil
}
