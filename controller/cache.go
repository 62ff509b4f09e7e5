package controller

import (
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/applyconfigurations"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	webappv1 "github.com/example/webapp-operator/apis/v1"
	webappv2 "github.com/example/webapp-operator/apis/v2"
	"github.com/example/webapp-operator/controller/pods"
	"github.com/example/webapp-operator/controller/ssa"
)

// CacheOptions keep only what the operator needs in memory: children (of every kind in children) that
// carry our managed-by label (a cluster with thousands of unrelated ones costs nothing); of them and of WebApps,
// only our field manager's entries of managedFields (see onlyOurFields); of ConfigMaps, Secrets, ResourceQuotas and
// Namespaces only name, namespace, UID and resourceVersion (a ConfigMap's or Secret's data is read when a WebApp
// refers to it); and only the given namespaces' objects when some are given (no Namespace at all then: a
// Namespace is cluster-scoped, and a namespaced install has no right to read one, see WatchesNamespaces).
func CacheOptions(namespaces ...string) cache.Options {
	ours := labels.SelectorFromSet(labels.Set{webappv2.LabelManagedBy: webappv2.ManagedBy})
	all := labels.Everything()
	o := cache.Options{
		ByObject: map[client.Object]cache.ByObject{
			&webappv2.WebApp{}:            {Label: all, Transform: onlyOurFields},
			metadataOnly("ConfigMap"):     {Label: all, Transform: slimMetadata},
			metadataOnly("Secret"):        {Label: all, Transform: slimMetadata},
			metadataOnly("ResourceQuota"): {Label: all, Transform: slimMetadata},
		},
		// A kind of child whose API may be installed after the start (HTTPRoute) cannot be listed here (the cache
		// refuses a kind the server does not serve): its informer, made when it is first read, gets these, like
		// every kind not listed.
		DefaultLabelSelector: ours,
		DefaultTransform:     onlyOurFields,
		// A read of a kind the cache has no informer for fails at once instead of starting one: every kind read is
		// watched first, and a kind whose API went away (servedAPIs) must not get an informer that lists a missing
		// resource forever while the read waits for it.
		ReaderFailOnMissingInformer: true,
	}
	for _, c := range children {
		if !c.ifServed && !c.isVariant() {
			o.ByObject[c.object()] = cache.ByObject{Label: ours, Transform: onlyOurFields}
		}
	}
	// The WebApps' pods (they carry our labels through the pod template), only what pods.Trouble reads; and of the
	// ReplicaSets that make them, which carry the same labels, only who controls them (see podWatch).
	o.ByObject[replicaSetMetadata()] = cache.ByObject{Label: ours, Transform: slimOwned}
	if len(namespaces) == 0 {
		// One store: the pod watch reads the pods in place, as cachedPods.
		o.ByObject[&corev1.Pod{}] = cache.ByObject{Label: ours, Transform: pods.Slim}
		o.ByObject[metadataOnly("Namespace")] = cache.ByObject{Label: all, Transform: slimMetadata}
		return o
	}
	// A store per namespace: the pod watch reads the pods through the cache's List, which needs the Pod type.
	o.ByObject[&corev1.Pod{}] = cache.ByObject{Label: ours, Transform: pods.SlimTyped}
	o.DefaultNamespaces = map[string]cache.Config{}
	for _, ns := range namespaces {
		o.DefaultNamespaces[ns] = cache.Config{}
	}
	return o
}

// onlyOurFields drops from a cached object what the operator never reads there: the managedFields entries of
// other managers (the Extract functions read only ours), kubectl's last-applied-configuration annotation (a
// second copy of a WebApp applied client-side), and from our entry the owner's UID (ssa.SharedOwnerKey; the
// reconciler's client puts it back). Whatever needs another manager's view (releasing the children, removing a
// finalizer another manager co-owns) reads the object live.
func onlyOurFields(o any) (any, error) {
	obj, ok := o.(client.Object)
	if !ok {
		return o, nil
	}
	if mf := obj.GetManagedFields(); slices.ContainsFunc(mf, notOurs) {
		obj.SetManagedFields(slices.DeleteFunc(slices.Clone(mf), notOurs))
	}
	// Our entry of a child without its owner's UID: one copy for every child of one shape (see controller/ssa/ownerkey.go).
	ssa.SharedOwnerKey(obj)
	if a := obj.GetAnnotations(); a[lastApplied] != "" {
		a = maps.Clone(a)
		delete(a, lastApplied)
		obj.SetAnnotations(a)
	}
	return obj, nil
}

const lastApplied = "kubectl.kubernetes.io/last-applied-configuration"

func notOurs(e metav1.ManagedFieldsEntry) bool { return e.Manager != webappv2.FieldManager }

func metadataOnly(kind string) *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: kind}}
}

// slimMetadata keeps of a ConfigMap's or Secret's metadata what the watch needs to find the WebApps referring to
// it and see it change; labels, annotations (a last-applied configuration can be large) and managedFields go.
func slimMetadata(o any) (any, error) {
	if m, ok := o.(*metav1.PartialObjectMetadata); ok {
		m.ObjectMeta = metav1.ObjectMeta{Name: m.Name, Namespace: m.Namespace, UID: m.UID, ResourceVersion: m.ResourceVersion}
	}
	return o, nil
}

// slimOwned keeps of a ReplicaSet's metadata what the pod watch reads: name, namespace, UID, resourceVersion and its
// controller's owner reference (not copied).
func slimOwned(o any) (any, error) {
	if m, ok := o.(*metav1.PartialObjectMetadata); ok {
		var canaryOf map[string]string
		if of := m.Labels[webappv2.LabelCanaryOf]; of != "" {
			// A canary's: whose canary it is (webAppOfReplicaSet).
			canaryOf = map[string]string{webappv2.LabelCanaryOf: of}
		}
		m.ObjectMeta = metav1.ObjectMeta{Name: m.Name, Namespace: m.Namespace, UID: m.UID, ResourceVersion: m.ResourceVersion,
			OwnerReferences: pods.ControllerRefOnly(m.OwnerReferences), Labels: canaryOf}
	}
	return o, nil
}

// NewScheme is the scheme of the operator's clients: client-go's types and the WebApp API.
func NewScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(webappv1.AddToScheme(s))
	utilruntime.Must(webappv2.AddToScheme(s))
	// HTTPRoute, a child where the Gateway API is installed.
	utilruntime.Must(gwv1.Install(s))
	return s
}

// childTypes knows the schema of the built-in kinds, to turn an apply configuration into the set of its fields.
var childTypes = applyconfigurations.NewTypeConverter(NewScheme())
