package provider

import (
	"slices"

	p "github.com/pulumi/pulumi-go-provider"
	"github.com/pulumi/pulumi-go-provider/infer"
)

// changeSet is what converging a resource would change, keyed by property
// as the preview shows it. Each resource computes it in one pure function
// of its inputs and its last read state, which its Diff returns and its
// Update acts on: what a preview shows is what the up does, and the table
// tests of that function cover both.
type changeSet map[string]p.PropertyDiff

func (c changeSet) update(key string) { c[key] = p.PropertyDiff{Kind: p.Update} }

func (c changeSet) replace(key string) { c[key] = p.PropertyDiff{Kind: p.UpdateReplace} }

// has reports whether any of keys changes.
func (c changeSet) has(keys ...string) bool {
	return slices.ContainsFunc(keys, func(k string) bool { _, ok := c[k]; return ok })
}

// diff is the changes as Diff answers them. deleteBeforeReplace is for
// resources whose old and new instance would be the same thing on the
// node (a path, a unit): the new one cannot exist beside the old.
func (c changeSet) diff(deleteBeforeReplace bool) infer.DiffResponse {
	return infer.DiffResponse{HasChanges: len(c) > 0, DetailedDiff: c, DeleteBeforeReplace: deleteBeforeReplace}
}
