package controller

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	webappv2 "github.com/example/webapp-operator/apis/v2"
)

// configRefIndex indexes WebApps by the ConfigMaps and Secrets their environment refers to ("configmap/NAME",
// "secret/NAME"), so a change to one finds the WebApps to roll.
const configRefIndex = "webapp.example.com/config-refs"

// configRefs lists the ConfigMaps and Secrets app's env and envFrom (the app's and its init containers') and its
// volumes refer to, as "configmap/NAME" and "secret/NAME", sorted and without repeats.
func configRefs(app *webappv2.WebApp) []string {
	var refs []string
	env := slices.Clone(app.Spec.Container.Env)
	for _, c := range app.Spec.Pod.InitContainers {
		env = append(env, c.Env...)
	}
	for _, v := range app.Spec.Volumes {
		if v.ConfigMap != nil {
			refs = append(refs, "configmap/"+v.ConfigMap.Name)
		}
		if v.Secret != nil {
			refs = append(refs, "secret/"+v.Secret.Name)
		}
	}
	for _, e := range env {
		if e.ValueFrom == nil {
			continue
		}
		if r := e.ValueFrom.ConfigMapKeyRef; r != nil {
			refs = append(refs, "configmap/"+r.Name)
		}
		if r := e.ValueFrom.SecretKeyRef; r != nil {
			refs = append(refs, "secret/"+r.Name)
		}
	}
	for _, e := range app.Spec.Container.EnvFrom {
		if e.ConfigMapRef != nil {
			refs = append(refs, "configmap/"+e.ConfigMapRef.Name)
		}
		if e.SecretRef != nil {
			refs = append(refs, "secret/"+e.SecretRef.Name)
		}
	}
	sort.Strings(refs)
	return slices.Compact(refs)
}

// indexConfigRefs is the indexer function of configRefIndex.
func indexConfigRefs(o client.Object) []string {
	return configRefs(o.(*webappv2.WebApp))
}

// configHash hashes the data of the ConfigMaps and Secrets app refers to. Their data is not cached (only their
// metadata is watched): it is read from the API server when the resourceVersions the metadata cache shows differ
// from the ones last hashed for this WebApp, so a resync costs no read. A missing one hashes as missing, so its
// creation rolls the pods too. "" when app refers to none.
func (r *WebAppReconciler) configHash(ctx context.Context, app *webappv2.WebApp) (string, error) {
	refs := configRefs(app)
	if len(refs) == 0 {
		return "", nil
	}
	versions, err := r.configVersions(ctx, app.Namespace, refs)
	if err != nil {
		return "", err
	}
	memoKey := types.NamespacedName{Namespace: app.Namespace, Name: app.Name}
	if hash, ok := r.mem.configHash(memoKey, versions); ok {
		return hash, nil
	}
	hash, err := r.readConfigHash(ctx, app.Namespace, refs)
	if err != nil {
		return "", err
	}
	r.mem.configHashed(memoKey, versions, hash)
	return hash, nil
}

// configVersions lists "ref@resourceVersion" of every reference, from the metadata cache.
func (r *WebAppReconciler) configVersions(ctx context.Context, namespace string, refs []string) (string, error) {
	var b strings.Builder
	for _, ref := range refs {
		kind, name, _ := strings.Cut(ref, "/")
		rv := "missing"
		if name != "" {
			_, version, found, err := r.peek(ctx, map[string]string{"configmap": "ConfigMap", "secret": "Secret"}[kind], types.NamespacedName{Namespace: namespace, Name: name})
			switch {
			case err != nil:
				return "", fmt.Errorf("looking up %s for the config hash: %w", ref, err)
			case found:
				rv = version
			}
		}
		fmt.Fprintf(&b, "%s@%s;", ref, rv)
	}
	return b.String(), nil
}

// readConfigHash reads the referenced ConfigMaps and Secrets and hashes their data. A Secret's data enters the
// hash only through an HMAC keyed with the Secret's UID, so the annotation, readable by anyone who can read the
// Deployment, cannot be used to confirm guesses of the Secret's values.
func (r *WebAppReconciler) readConfigHash(ctx context.Context, namespace string, refs []string) (string, error) {
	h := sha256.New()
	for _, ref := range refs {
		kind, name, _ := strings.Cut(ref, "/")
		found, data, err := r.readConfig(ctx, kind, types.NamespacedName{Namespace: namespace, Name: name})
		if err != nil {
			return "", fmt.Errorf("reading %s for the config hash: %w", ref, err)
		}
		// Length-prefixed, in key order: no two different contents hash the same way by concatenation.
		_, _ = fmt.Fprintf(h, "%d:%s;%t;", len(ref), ref, found)
		keys := make([]string, 0, len(data))
		for k := range data {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			_, _ = fmt.Fprintf(h, "%d:%s%d:", len(k), k, len(data[k]))
			_, _ = h.Write(data[k])
		}
	}
	return hex.EncodeToString(h.Sum(nil))[:32], nil
}

// readConfig returns whether the ConfigMap or Secret exists and its data (a Secret's values as HMACs). A
// reference without a name (the API allows it) is missing.
func (r *WebAppReconciler) readConfig(ctx context.Context, kind string, key types.NamespacedName) (bool, map[string][]byte, error) {
	if key.Name == "" {
		return false, nil, nil
	}
	data := map[string][]byte{}
	if kind == "configmap" {
		cm := &corev1.ConfigMap{}
		if err := r.reader().Get(ctx, key, cm); err != nil {
			return false, nil, client.IgnoreNotFound(err)
		}
		for k, v := range cm.Data {
			data[k] = []byte(v)
		}
		for k, v := range cm.BinaryData {
			data["binary:"+k] = v
		}
		return true, data, nil
	}
	s := &corev1.Secret{}
	if err := r.reader().Get(ctx, key, s); err != nil {
		return false, nil, client.IgnoreNotFound(err)
	}
	for k, v := range s.Data {
		mac := hmac.New(sha256.New, []byte(s.UID))
		_, _ = mac.Write(v)
		data[k] = mac.Sum(nil)
	}
	return true, data, nil
}

// webAppsReferring maps a ConfigMap or Secret to the WebApps of its namespace whose environment refers to it.
func (r *WebAppReconciler) webAppsReferring(kind string) func(context.Context, client.Object) []reconcile.Request {
	return func(ctx context.Context, o client.Object) []reconcile.Request {
		list := &webappv2.WebAppList{}
		if err := r.Client.List(ctx, list, client.InNamespace(o.GetNamespace()), client.MatchingFields{configRefIndex: kind + "/" + o.GetName()}); err != nil {
			// The resync still rolls the WebApps that refer to it, later.
			log.FromContext(ctx).Error(err, "listing the WebApps that refer to a changed "+kind, "name", o.GetName(), "namespace", o.GetNamespace())
			return nil
		}
		reqs := make([]reconcile.Request, 0, len(list.Items))
		for _, app := range list.Items {
			reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: app.Namespace, Name: app.Name}})
		}
		return reqs
	}
}
