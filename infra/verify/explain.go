package verify

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/kube-openapi/pkg/spec3"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

// Field is what `kubectl explain RESOURCE.PATH` prints for one field,
// read from the cluster's own OpenAPI v3 document.
type Field struct {
	GVK  schema.GroupVersionKind
	Path []string
	// Type is kubectl's type hint: "IntOrString", "[]Container",
	// "map[string]string", "integer".
	Type string
	// Description is the field's, then its type's (as kubectl prints it).
	Description string
}

const (
	gvkExtension = "x-kubernetes-group-version-kind"
	schemaRef    = "#/components/schemas/"
)

// Explain looks a field path up in the kind that gvr serves, in the
// group-version's OpenAPI v3 document, the way kubectl explain's v3 path
// does: the kind from the resource's operations, its schema by
// x-kubernetes-group-version-kind, then each field through $ref, allOf,
// array items and map values. An empty path explains the kind itself.
func Explain(doc *spec3.OpenAPI, gvr schema.GroupVersionResource, path []string) (Field, error) {
	gvk, err := kindOf(doc, gvr)
	if err != nil {
		return Field{}, err
	}
	f := Field{GVK: gvk, Path: path}
	var top *spec.Schema
	if doc.Components != nil {
		for _, s := range doc.Components.Schemas {
			if slices.Contains(schemaKinds(s), gvk) {
				top = s
				break
			}
		}
	}
	if top == nil {
		return f, fmt.Errorf("the OpenAPI document has no schema for %s", gvk)
	}
	cur := top
	for i, name := range path {
		parent := resolve(doc, cur)
		sub, ok := property(doc, parent, name, map[string]bool{})
		if !ok {
			at := gvk.Kind
			if i > 0 {
				at += " " + strings.Join(path[:i], ".")
			}
			return f, fmt.Errorf("field %q does not exist in %s (it has: %s)", name, at, strings.Join(fieldNames(doc, parent), ", "))
		}
		cur = sub
	}
	f.Type = typeGuess(doc, cur)
	f.Description = strings.Join(descriptions(doc, cur, map[*spec.Schema]bool{}), "\n")
	return f, nil
}

// kindOf reads the kind a resource's list or get operation declares.
func kindOf(doc *spec3.OpenAPI, gvr schema.GroupVersionResource) (schema.GroupVersionKind, error) {
	prefix := "/apis/" + gvr.Group + "/" + gvr.Version
	if gvr.Group == "" {
		prefix = "/api/" + gvr.Version
	}
	if doc.Paths != nil {
		for _, p := range []string{
			prefix + "/" + gvr.Resource,
			prefix + "/" + gvr.Resource + "/{name}",
			prefix + "/namespaces/{namespace}/" + gvr.Resource,
			prefix + "/namespaces/{namespace}/" + gvr.Resource + "/{name}",
		} {
			path := doc.Paths.Paths[p]
			if path == nil {
				continue
			}
			for _, op := range []*spec3.Operation{path.Get, path.Post, path.Put, path.Patch, path.Delete} {
				if op == nil {
					continue
				}
				if gvk, ok := toGVK(op.Extensions[gvkExtension]); ok {
					return gvk, nil
				}
			}
		}
	}
	return schema.GroupVersionKind{}, fmt.Errorf("the OpenAPI document serves no resource %s", gvr)
}

func toGVK(v any) (schema.GroupVersionKind, bool) {
	m, ok := v.(map[string]any)
	if !ok {
		return schema.GroupVersionKind{}, false
	}
	g, _ := m["group"].(string)
	ver, _ := m["version"].(string)
	k, _ := m["kind"].(string)
	return schema.GroupVersionKind{Group: g, Version: ver, Kind: k}, k != ""
}

func schemaKinds(s *spec.Schema) []schema.GroupVersionKind {
	list, _ := s.Extensions[gvkExtension].([]any)
	var out []schema.GroupVersionKind
	for _, v := range list {
		if gvk, ok := toGVK(v); ok {
			out = append(out, gvk)
		}
	}
	return out
}

// resolve follows a schema's $ref within the document (nil when it
// points nowhere).
func resolve(doc *spec3.OpenAPI, s *spec.Schema) *spec.Schema {
	ref := s.Ref.String()
	if ref == "" {
		return s
	}
	name, ok := strings.CutPrefix(ref, schemaRef)
	if !ok || doc.Components == nil {
		return nil
	}
	return doc.Components.Schemas[name]
}

// property finds a field below s: its own property, else one of its array
// items' or map values', else one of its allOf alternatives'. seen stops
// reference cycles that consume no path segment.
func property(doc *spec3.OpenAPI, s *spec.Schema, name string, seen map[string]bool) (*spec.Schema, bool) {
	if s == nil {
		return nil, false
	}
	if ref := s.Ref.String(); ref != "" {
		if seen[ref] {
			return nil, false
		}
		seen[ref] = true
		s = resolve(doc, s)
		if s == nil {
			return nil, false
		}
	}
	if p, ok := s.Properties[name]; ok {
		return &p, true
	}
	if s.Items != nil && s.Items.Schema != nil {
		return property(doc, s.Items.Schema, name, seen)
	}
	if s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil {
		return property(doc, s.AdditionalProperties.Schema, name, seen)
	}
	for i := range s.AllOf {
		if p, ok := property(doc, &s.AllOf[i], name, seen); ok {
			return p, true
		}
	}
	return nil, false
}

// fieldNames lists the fields one level below s, for an error that says
// what exists.
func fieldNames(doc *spec3.OpenAPI, s *spec.Schema) []string {
	var out []string
	var walk func(s *spec.Schema, depth int)
	walk = func(s *spec.Schema, depth int) {
		if s = resolve(doc, s); s == nil || depth > 8 {
			return
		}
		for k := range s.Properties {
			out = append(out, k)
		}
		if s.Items != nil && s.Items.Schema != nil {
			walk(s.Items.Schema, depth+1)
		}
		if s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil {
			walk(s.AdditionalProperties.Schema, depth+1)
		}
		for i := range s.AllOf {
			walk(&s.AllOf[i], depth+1)
		}
	}
	walk(s, 0)
	slices.Sort(out)
	if len(out) == 0 {
		return []string{"no fields"}
	}
	return slices.Compact(out)
}

// descriptions are a field's description, then those of the types it is
// made of (allOf, items, map values), as kubectl explain prints them.
func descriptions(doc *spec3.OpenAPI, s *spec.Schema, seen map[*spec.Schema]bool) []string {
	if s = resolve(doc, s); s == nil || seen[s] {
		return nil
	}
	seen[s] = true
	var out []string
	if s.Description != "" {
		out = append(out, s.Description)
	}
	for i := range s.AllOf {
		out = append(out, descriptions(doc, &s.AllOf[i], seen)...)
	}
	if s.Items != nil && s.Items.Schema != nil {
		out = append(out, descriptions(doc, s.Items.Schema, seen)...)
	}
	if s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil {
		out = append(out, descriptions(doc, s.AdditionalProperties.Schema, seen)...)
	}
	return out
}

// typeGuess is kubectl explain's type hint (its "typeGuess" template).
func typeGuess(doc *spec3.OpenAPI, s *spec.Schema) string {
	switch {
	case s.Items != nil && s.Items.Schema != nil:
		return "[]" + typeGuess(doc, s.Items.Schema)
	case s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil:
		return "map[string]" + typeGuess(doc, s.AdditionalProperties.Schema)
	case len(s.AllOf) == 1 && len(s.Properties) == 0:
		return typeGuess(doc, &s.AllOf[0])
	case s.Ref.String() != "":
		ref := s.Ref.String()
		if r := resolve(doc, s); r != nil && len(r.Type) > 0 && r.Type[0] != "object" {
			return r.Type[0]
		}
		name := ref[strings.LastIndex(ref, "/")+1:]
		return name[strings.LastIndex(name, ".")+1:]
	case len(s.Type) == 0 || s.Type[0] == "object":
		return "Object"
	default:
		return s.Type[0]
	}
}
