package conversion

import (
	"context"
	_ "embed"
	"fmt"
	"slices"
	"strings"
	"sync"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/listtype"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"sigs.k8s.io/yaml"

	webappv1 "github.com/example/webapp-operator/apis/v1"
	webappv2 "github.com/example/webapp-operator/apis/v2"
)

// crdYAML is the WebApp CRD (manifests/crd/example.com_webapps.yaml, copied here by make generate): its v2 schema
// is the one the API server holds v2 writes to.
//
//go:embed webapps.crd.yaml
var crdYAML []byte

// maxDroppedMessage bounds status.conversionDropped.message (its schema's maxLength).
const maxDroppedMessage = 4096

// schemaV2 validates a v2 WebApp as the API server validates a v2 write: the OpenAPI schema, the sets and maps
// of x-kubernetes-list-type, and the CEL rules, with the API server's own code.
type schemaV2 struct {
	openAPI    validation.SchemaValidator
	structural *structuralschema.Structural
	cel        *cel.Validator
}

var v2Schema = sync.OnceValues(func() (*schemaV2, error) {
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict(crdYAML, crd); err != nil {
		return nil, fmt.Errorf("reading the embedded CRD: %w", err)
	}
	i := slices.IndexFunc(crd.Spec.Versions, func(v apiextensionsv1.CustomResourceDefinitionVersion) bool {
		return v.Name == webappv2.GroupVersion.Version
	})
	if i < 0 || crd.Spec.Versions[i].Schema == nil {
		return nil, fmt.Errorf("the embedded CRD has no %s schema", webappv2.GroupVersion.Version)
	}
	internal := &apiextensions.JSONSchemaProps{}
	if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(crd.Spec.Versions[i].Schema.OpenAPIV3Schema, internal, nil); err != nil {
		return nil, err
	}
	openAPI, _, err := validation.NewSchemaValidator(internal)
	if err != nil {
		return nil, err
	}
	structural, err := structuralschema.NewStructural(internal)
	if err != nil {
		return nil, err
	}
	return &schemaV2{openAPI: openAPI, structural: structural, cel: cel.NewValidator(structural, true, celconfig.PerCallLimit)}, nil
})

// validate is what v2's schema says of app's spec (nil: it passes).
func (s *schemaV2) validate(app *webappv2.WebApp) field.ErrorList {
	spec, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&app.Spec)
	if err != nil {
		return field.ErrorList{field.InternalError(field.NewPath("spec"), err)}
	}
	// As the API server does before it validates a custom resource: a null in a field that is not nullable is
	// dropped (Go's JSON form has nulls where a pointer without omitempty is nil, e.g. a gRPC probe's service).
	dropNulls(spec)
	obj := map[string]any{
		"apiVersion": webappv2.GroupVersion.String(), "kind": "WebApp",
		"metadata": map[string]any{"name": app.Name, "namespace": app.Namespace},
		"spec":     spec,
	}
	errs := validation.ValidateCustomResource(nil, obj, s.openAPI)
	errs = append(errs, listtype.ValidateListSetsAndMaps(nil, s.structural, obj)...)
	// As the API server (apiextensions-apiserver's customResourceStrategy): CEL runs unless an error blocks it.
	if !slices.ContainsFunc(errs, blocking) {
		celErrs, _ := s.cel.Validate(context.Background(), nil, s.structural, obj, nil, celconfig.RuntimeCELCostBudget)
		errs = append(errs, celErrs...)
	}
	return errs
}

// dropNulls removes every null value of the maps in v, at any depth (the WebApp's schema has no nullable field).
func dropNulls(v any) {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if e == nil {
				delete(x, k)
				continue
			}
			dropNulls(e)
		}
	case []any:
		for _, e := range x {
			dropNulls(e)
		}
	}
}

// blocking says whether an error keeps the API server from running the CEL rules (its hasBlockingErr): a value
// of the wrong type, missing, unsupported, too long or too many.
func blocking(e *field.Error) bool {
	switch e.Type {
	case field.ErrorTypeNotSupported, field.ErrorTypeRequired, field.ErrorTypeTooLong, field.ErrorTypeTooMany, field.ErrorTypeTypeInvalid:
		return true
	}
	return false
}

// ToHub converts a v1 WebApp to v2. What it restores from the conversion data (the v1 object's status, or the
// legacy annotation) is held to v2's whole schema: a restored field that v2 refuses is dropped (the field reads as
// v1 alone says it: the v1 port as the only port, no autoscaling, no expose, no volume, and so on), never stored, and
// status.conversionDropped names it with v2's errors. It never fails on an object the API server accepted:
// conversion sits on the read path.
//
// The fields are tried one at a time on top of what v1 alone says, in a fixed order (ports, autoscaling, expose,
// then v2Fields in their order):
// a field is dropped when adding it brings an error that the object without it does not have, so an error in a
// rule over the whole spec is charged to the field that brought it, and never to v1's own fields.
func ToHub(src *webappv1.WebApp, dst *webappv2.WebApp) error {
	restored := toHub(src, dst)
	if len(restored) == 0 {
		return nil
	}
	s, err := v2Schema()
	if err != nil {
		return err
	}
	if len(s.validate(dst)) == 0 {
		return nil
	}
	full := dst.DeepCopy()
	for _, f := range restored {
		unrestore(f, src, dst)
	}
	base := errorSet(s.validate(dst))
	var dropped []string
	var report field.ErrorList
	for _, f := range restored {
		with := dst.DeepCopy()
		restore(f, full, with)
		var added field.ErrorList
		for _, e := range s.validate(with) {
			if !base[e.Error()] {
				added = append(added, e)
			}
		}
		if len(added) > 0 {
			dropped, report = append(dropped, f), append(report, added...)
			continue
		}
		*dst = *with
	}
	if len(dropped) > 0 {
		dst.Status.ConversionDropped = &webappv2.ConversionDropped{
			Generation: dst.Generation,
			Fields:     dropped,
			Message:    truncate(report.ToAggregate().Error(), maxDroppedMessage),
		}
	}
	return nil
}

func errorSet(errs field.ErrorList) map[string]bool {
	set := make(map[string]bool, len(errs))
	for _, e := range errs {
		set[e.Error()] = true
	}
	return set
}

// truncate cuts s to at most n bytes, on a character boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n-3], "") + "..."
}
