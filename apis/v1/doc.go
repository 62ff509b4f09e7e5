// Package v1 contains the WebApp API, group example.com, version v1.
//
// +kubebuilder:object:generate=true
// +kubebuilder:ac:generate=true
// +kubebuilder:ac:output:package=../../applyconfig
// +groupName=example.com
package v1
