package ssa

import (
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/applyconfigurations"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	webappv2 "github.com/example/webapp-operator/apis/v2"
	"github.com/example/webapp-operator/controller/desired"
	"github.com/example/webapp-operator/controller/internal/apptest"
)

func withFields(entries ...metav1.ManagedFieldsEntry) *appsv1.Deployment {
	return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{ManagedFields: entries}}
}

const (
	// Our container with env A and DEBUG, and replicas.
	fieldsAD = `{"f:spec":{"f:replicas":{},"f:template":{"f:spec":{"f:containers":{"k:{\"name\":\"app\"}":{".":{},"f:name":{},"f:env":{"k:{\"name\":\"A\"}":{".":{},"f:name":{},"f:value":{}},"k:{\"name\":\"DEBUG\"}":{".":{},"f:name":{},"f:value":{}}}}}}}}}`
	// The same without DEBUG.
	fieldsA = `{"f:spec":{"f:replicas":{},"f:template":{"f:spec":{"f:containers":{"k:{\"name\":\"app\"}":{".":{},"f:name":{},"f:env":{"k:{\"name\":\"A\"}":{".":{},"f:name":{},"f:value":{}}}}}}}}}`
	// Another writer's own env var, nothing of ours.
	fieldsX   = `{"f:spec":{"f:template":{"f:spec":{"f:containers":{"k:{\"name\":\"app\"}":{"f:env":{"k:{\"name\":\"X\"}":{".":{},"f:name":{},"f:value":{}}}}}}}}}`
	debugPath = `.spec.template.spec.containers[name="app"].env[name="DEBUG"]`
)

func TestRetainedFields(t *testing.T) {
	cases := []struct {
		name          string
		before, after *appsv1.Deployment
		want          []webappv2.RetainedField
	}{
		{"nothing let go", withFields(entry(webappv2.FieldManager, metav1.ManagedFieldsOperationApply, fieldsAD)),
			withFields(entry(webappv2.FieldManager, metav1.ManagedFieldsOperationApply, fieldsAD), entry("kubectl-create", metav1.ManagedFieldsOperationUpdate, fieldsAD)), nil},
		{"let go, nobody else holds it", withFields(entry(webappv2.FieldManager, metav1.ManagedFieldsOperationApply, fieldsAD)),
			withFields(entry(webappv2.FieldManager, metav1.ManagedFieldsOperationApply, fieldsA), entry("other", metav1.ManagedFieldsOperationUpdate, fieldsX)), nil},
		{"let go, the creator holds it: the env entry, listed whole", withFields(entry(webappv2.FieldManager, metav1.ManagedFieldsOperationApply, fieldsAD)),
			withFields(entry(webappv2.FieldManager, metav1.ManagedFieldsOperationApply, fieldsA), entry("kubectl-create", metav1.ManagedFieldsOperationUpdate, fieldsAD)),
			[]webappv2.RetainedField{{Kind: "Deployment", Field: debugPath, Managers: []string{"kubectl-create"}}}},
		{"two managers hold it", withFields(entry(webappv2.FieldManager, metav1.ManagedFieldsOperationApply, fieldsAD)),
			withFields(entry(webappv2.FieldManager, metav1.ManagedFieldsOperationApply, fieldsA), entry("ops", metav1.ManagedFieldsOperationApply, fieldsAD),
				entry("kubectl-create", metav1.ManagedFieldsOperationUpdate, fieldsAD)),
			[]webappv2.RetainedField{{Kind: "Deployment", Field: debugPath, Managers: []string{"kubectl-create", "ops"}}}},
		{"a subresource's manager is not a co-owner", withFields(entry(webappv2.FieldManager, metav1.ManagedFieldsOperationApply, fieldsAD)),
			withFields(entry(webappv2.FieldManager, metav1.ManagedFieldsOperationApply, fieldsA), func() metav1.ManagedFieldsEntry {
				e := entry("hpa", metav1.ManagedFieldsOperationUpdate, fieldsAD)
				e.Subresource = "scale"
				return e
			}()), nil},
		{"before owned nothing of ours", withFields(), withFields(entry("kubectl-create", metav1.ManagedFieldsOperationUpdate, fieldsAD)), nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := RetainedFields("Deployment", tc.before, tc.after)
			if !slices.EqualFunc(got, tc.want, sameRetained) {
				t.Errorf("retainedFields = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func sameRetained(a, b webappv2.RetainedField) bool {
	return a.Kind == b.Kind && a.Field == b.Field && slices.Equal(a.Managers, b.Managers)
}

func TestStillRetained(t *testing.T) {
	listed := []webappv2.RetainedField{{Kind: "Deployment", Field: debugPath, Managers: []string{"kubectl-create"}},
		{Kind: "Service", Field: ".metadata.labels.x", Managers: []string{"ops"}}}
	// Keys with dots: "example.com/a.b" is another key than "example.com/a", not a field below it.
	dotted := []webappv2.RetainedField{{Kind: "Deployment", Field: ".metadata.annotations.example.com/a", Managers: []string{"ops"}}}
	annotation := func(key string) string { return `{"f:metadata":{"f:annotations":{"f:` + key + `":{}}}}` }
	cases := []struct {
		name   string
		listed []webappv2.RetainedField
		obj    *appsv1.Deployment
		want   []webappv2.RetainedField
	}{
		{"still held", listed, withFields(entry(webappv2.FieldManager, metav1.ManagedFieldsOperationApply, fieldsA), entry("kubectl-create", metav1.ManagedFieldsOperationUpdate, fieldsAD)),
			listed[:1]},
		{"removed by the user", listed, withFields(entry(webappv2.FieldManager, metav1.ManagedFieldsOperationApply, fieldsA), entry("kubectl-create", metav1.ManagedFieldsOperationUpdate, fieldsA)),
			nil},
		{"ours again (the spec sets it again)", listed, withFields(entry(webappv2.FieldManager, metav1.ManagedFieldsOperationApply, fieldsAD), entry("kubectl-create", metav1.ManagedFieldsOperationUpdate, fieldsAD)),
			nil},
		{"held by a manager not listed", listed, withFields(entry(webappv2.FieldManager, metav1.ManagedFieldsOperationApply, fieldsA), entry("ops", metav1.ManagedFieldsOperationApply, fieldsAD)),
			nil},
		{"a dotted key we own is not the retained one", dotted, withFields(entry(webappv2.FieldManager, metav1.ManagedFieldsOperationApply, annotation("example.com/a.b")),
			entry("ops", metav1.ManagedFieldsOperationApply, annotation("example.com/a"))), dotted},
		{"a dotted key another manager holds is not the retained one", dotted, withFields(entry("ops", metav1.ManagedFieldsOperationApply, annotation("example.com/a.b"))),
			nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := StillRetained("Deployment", tc.listed, tc.obj); !slices.EqualFunc(got, tc.want, sameRetained) {
				t.Errorf("stillRetained = %+v, want %+v", got, tc.want)
			}
		})
	}
}

// releases decides whether an apply lets go of something: only then is the server asked who keeps it.
func TestReleases(t *testing.T) {
	app := apptest.NewApp("web", 3, 80, "nginx")
	want := mustDeployment(t, app)
	cases := []struct {
		name   string
		before *appsv1.Deployment
		want   any
		lets   bool
	}{
		{"nothing owned yet", withFields(), want, false},
		{"owns what is sent, and less", withFields(entry(webappv2.FieldManager, metav1.ManagedFieldsOperationApply, `{"f:spec":{"f:replicas":{}}}`)), want, false},
		{"owns an env var no longer sent", withFields(entry(webappv2.FieldManager, metav1.ManagedFieldsOperationApply, fieldsAD)), want, true},
		{"another manager's fields are not ours to let go", withFields(entry("kubectl-create", metav1.ManagedFieldsOperationUpdate, fieldsAD)), want, false},
		{"a Service apply against a Deployment's fields cannot be read: asked", withFields(entry(webappv2.FieldManager, metav1.ManagedFieldsOperationApply, fieldsAD)),
			corev1ac.Service("web", "ns"), true},
		{"nil before", nil, want, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := Releases(childTypes, tc.before, tc.want); got != tc.lets {
				t.Errorf("releases = %v, want %v", got, tc.lets)
			}
		})
	}
}

// mustDeployment is the desired Deployment of app with no inputs; an error fails the test.
func mustDeployment(t *testing.T, app *webappv2.WebApp) any {
	t.Helper()
	d, err := desired.Deployment(app, desired.Inputs{})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// childTypes knows the built-in kinds' schemas, as the reconciler's converter does for the children it writes.
var childTypes = applyconfigurations.NewTypeConverter(clientgoscheme.Scheme)

// entry is a managedFields entry of manager on the main resource, with fields in the server's FieldsV1 form.
func entry(manager string, op metav1.ManagedFieldsOperationType, fields string) metav1.ManagedFieldsEntry {
	return metav1.ManagedFieldsEntry{Manager: manager, Operation: op, APIVersion: "apps/v1", FieldsType: "FieldsV1",
		FieldsV1: metav1.NewFieldsV1(fields)}
}
