// Package testmain is the TestMain every package's tests share. It puts the
// tests' temporary files (t.TempDir, os.MkdirTemp, the JetStream stores and
// caches the tests make there) on a memory file system when the machine has a
// usable one, where fsync costs nothing: the suites fsync a lot (every commit,
// every Ready, every JetStream write), and on a disk that is most of their time.
// What is tested does not change: the code under test still makes every fsync.
//
// Each package with tests has
//
//	func TestMain(m *testing.M) { testmain.Main(m) }
//
// A TMPDIR already set is kept, so TMPDIR=/some/disk go test ./... runs the
// suites on that disk.
package testmain

import (
	"os"
	"testing"
)

// MinFree is the free space a memory file system needs to be used.
const MinFree = 2 << 30

// Main sets up the temporary directory (Setup), runs the tests and exits with
// their code.
func Main(m *testing.M) {
	Setup()
	os.Exit(m.Run())
}

// Setup points TMPDIR (os.TempDir, and child processes) at /dev/shm when TMPDIR
// is unset and /dev/shm is a writable memory file system with room (MinFree)
// that allows executing files (tests run binaries they build). It reports the
// directory in effect. Packages with their own TestMain call it first.
//
// It also turns off the AWS SDK's instance-metadata lookup (unless the caller set
// AWS_EC2_METADATA_DISABLED): a test that builds an S3 store without credentials
// must fail on its own machine, never ask a link-local metadata address.
func Setup() string {
	if _, set := os.LookupEnv("AWS_EC2_METADATA_DISABLED"); !set {
		os.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	}
	if os.Getenv("TMPDIR") == "" && usable("/dev/shm") {
		os.Setenv("TMPDIR", "/dev/shm")
	}
	return os.TempDir()
}
