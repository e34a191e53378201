package s3

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/credentials/ec2rolecreds"
	"github.com/aws/aws-sdk-go-v2/credentials/endpointcreds"
	"github.com/aws/aws-sdk-go-v2/credentials/processcreds"
	"github.com/aws/aws-sdk-go-v2/credentials/stscreds"
	"github.com/aws/aws-sdk-go-v2/service/sts"

	"github.com/syncledger/syncledger/ledger"
)

// awsSettings are what the store takes from the AWS configuration chain.
type awsSettings struct {
	creds    aws.CredentialsProvider
	region   string
	endpoint string // "" for AWS's own
	httpc    aws.HTTPClient
	retryer  aws.Retryer
}

// loadAWS resolves credentials, region, endpoint, HTTP client and retry policy
// the way the SDK's config.LoadDefaultConfig does, for the sources it reads:
//
//   - credentials: a named profile (AWS_PROFILE) first if one is named, else
//     the environment's keys (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
//     AWS_SESSION_TOKEN), else web identity from the environment
//     (AWS_WEB_IDENTITY_TOKEN_FILE, AWS_ROLE_ARN, AWS_ROLE_SESSION_NAME), else
//     the default profile; a profile of the shared config and credentials
//     files (AWS_CONFIG_FILE, AWS_SHARED_CREDENTIALS_FILE; ~/.aws/config,
//     ~/.aws/credentials) gives keys, credential_process, role_arn with
//     source_profile, credential_source or web_identity_token_file (assumed
//     through STS); with none of these, container credentials
//     (AWS_CONTAINER_CREDENTIALS_RELATIVE_URI or _FULL_URI, with
//     AWS_CONTAINER_AUTHORIZATION_TOKEN or _TOKEN_FILE), then the EC2 instance
//     role (IMDS, unless AWS_EC2_METADATA_DISABLED=true);
//   - region: Config.Region, AWS_REGION, AWS_DEFAULT_REGION, the profile's
//     region, then DefaultRegion;
//   - endpoint: Config.Endpoint, AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL, the
//     profile's endpoint_url (none of the last three with
//     AWS_IGNORE_CONFIGURED_ENDPOINT_URLS=true); STS's: AWS_ENDPOINT_URL_STS,
//     AWS_ENDPOINT_URL;
//   - AWS_CA_BUNDLE (or the profile's ca_bundle), AWS_MAX_ATTEMPTS.
//
// It does not link the SDK's config package: that package's SSO, SSO-OIDC and
// sign-in clients cost every syncledger command 0.5 ms of package inits and
// 2 MiB at start-up whatever its blob store (issue 17). A profile that signs
// in with IAM Identity Center (sso_*) or that needs an MFA code is refused
// with the way out: the AWS CLI's export-credentials as credential_process.
func loadAWS(cfg Config) (*awsSettings, error) {
	s := &awsSettings{}
	profileName, named := os.Getenv("AWS_PROFILE"), true
	if profileName == "" {
		profileName = os.Getenv("AWS_DEFAULT_PROFILE")
	}
	if profileName == "" {
		profileName, named = "default", false
	}
	profiles, err := loadProfiles()
	if err != nil {
		return nil, err
	}
	prof := profiles[profileName]
	if named && prof == nil && cfg.Credentials == nil {
		return nil, fmt.Errorf("AWS profile %q (AWS_PROFILE) is in neither %s nor %s: %w", profileName, configFile(), credentialsFile(), ledger.ErrInvalid)
	}

	s.region = firstOf(cfg.Region, os.Getenv("AWS_REGION"), os.Getenv("AWS_DEFAULT_REGION"), prof.get("region"), DefaultRegion)
	if !strings.EqualFold(os.Getenv("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS"), "true") {
		s.endpoint = firstOf(os.Getenv("AWS_ENDPOINT_URL_S3"), os.Getenv("AWS_ENDPOINT_URL"), prof.get("endpoint_url"))
	}
	s.endpoint = firstOf(cfg.Endpoint, s.endpoint)

	if cfg.HTTPClient != nil {
		s.httpc = cfg.HTTPClient
	} else {
		bundle := firstOf(os.Getenv("AWS_CA_BUNDLE"), prof.get("ca_bundle"))
		var roots *x509.CertPool
		if bundle != "" {
			pem, err := os.ReadFile(bundle)
			if err != nil {
				return nil, fmt.Errorf("AWS CA bundle: %w", err)
			}
			roots = x509.NewCertPool()
			if !roots.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("AWS CA bundle %s holds no PEM certificate: %w", bundle, ledger.ErrInvalid)
			}
		}
		// The SDK's client keeps 10 idle connections per host (net/http's
		// default is 2); a host fetches 16 blobs at once by default, so the rest
		// were closed and dialled again all the time (16% of a cold sync's
		// client CPU, and the server's accepts).
		s.httpc = awshttp.NewBuildableClient().WithTransportOptions(func(t *http.Transport) {
			t.MaxIdleConnsPerHost = maxIdleConnsPerHost
			t.MaxIdleConns = max(t.MaxIdleConns, maxIdleConnsPerHost)
			if roots != nil {
				if t.TLSClientConfig == nil {
					t.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12}
				}
				t.TLSClientConfig.RootCAs = roots
			}
		})
	}

	s.retryer = retry.NewStandard()
	if v := os.Getenv("AWS_MAX_ATTEMPTS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("AWS_MAX_ATTEMPTS=%q: want a positive number: %w", v, ledger.ErrInvalid)
		}
		s.retryer = retry.AddWithMaxAttempts(s.retryer, n)
	}

	creds := cfg.Credentials
	if creds == nil {
		r := &resolver{s: s, profiles: profiles}
		switch {
		case named:
			creds, err = r.fromProfile(profileName, 0)
		case os.Getenv("AWS_ACCESS_KEY_ID") != "" && os.Getenv("AWS_SECRET_ACCESS_KEY") != "":
			creds = envKeys()
		case os.Getenv("AWS_WEB_IDENTITY_TOKEN_FILE") != "":
			creds, err = r.webIdentity(os.Getenv("AWS_WEB_IDENTITY_TOKEN_FILE"), os.Getenv("AWS_ROLE_ARN"), os.Getenv("AWS_ROLE_SESSION_NAME"), "environment")
		default:
			creds, err = r.fromProfile(profileName, 0)
		}
		if err != nil {
			return nil, err
		}
	}
	if _, ok := creds.(*aws.CredentialsCache); !ok {
		creds = aws.NewCredentialsCache(creds)
	}
	s.creds = creds
	return s, nil
}

func firstOf(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}

func envKeys() aws.CredentialsProvider {
	return credentials.NewStaticCredentialsProvider(os.Getenv("AWS_ACCESS_KEY_ID"), os.Getenv("AWS_SECRET_ACCESS_KEY"), os.Getenv("AWS_SESSION_TOKEN"))
}

// profile is one profile's settings, from both shared files.
type profile map[string]string

func (p profile) get(key string) string { return p[key] }

func homeFile(env string, elem ...string) string {
	if p := os.Getenv(env); p != "" {
		return p
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return ""
	}
	return filepath.Join(append([]string{home}, elem...)...)
}

func configFile() string      { return homeFile("AWS_CONFIG_FILE", ".aws", "config") }
func credentialsFile() string { return homeFile("AWS_SHARED_CREDENTIALS_FILE", ".aws", "credentials") }

// loadProfiles reads the shared config file ([profile NAME], [default]) and
// the shared credentials file ([NAME]), the latter's keys winning.
func loadProfiles() (map[string]profile, error) {
	out := map[string]profile{}
	for _, f := range []struct {
		path   string
		config bool
	}{{configFile(), true}, {credentialsFile(), false}} {
		if f.path == "" {
			continue
		}
		sections, err := readINI(f.path)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("AWS shared configuration: %w", err)
		}
		for name, kv := range sections {
			if f.config {
				n, ok := strings.CutPrefix(name, "profile ")
				if !ok && name != "default" {
					continue // sso-session, services: not profiles
				}
				name = strings.TrimSpace(n)
			}
			if out[name] == nil {
				out[name] = profile{}
			}
			for k, v := range kv {
				out[name][k] = v
			}
		}
	}
	return out, nil
}

// readINI reads an AWS shared file: [section] headers, key = value lines,
// # and ; comments; indented lines below a key without value (nested
// settings such as "s3 =") are skipped.
func readINI(path string) (map[string]map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]map[string]string{}
	var cur map[string]string
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		raw := sc.Text()
		line := strings.TrimSpace(raw)
		switch {
		case line == "" || line[0] == '#' || line[0] == ';':
			continue
		case line[0] == '[':
			name, ok := strings.CutSuffix(line, "]")
			if !ok {
				return nil, fmt.Errorf("%s:%d: unterminated section header %q", path, n, line)
			}
			name = strings.TrimSpace(name[1:])
			if out[name] == nil {
				out[name] = map[string]string{}
			}
			cur = out[name]
		case raw[0] == ' ' || raw[0] == '\t':
			continue // a nested setting
		default:
			k, v, ok := strings.Cut(line, "=")
			if !ok {
				return nil, fmt.Errorf("%s:%d: want key = value, got %q", path, n, line)
			}
			if cur != nil {
				cur[strings.ToLower(strings.TrimSpace(k))] = strings.TrimSpace(v)
			}
		}
	}
	return out, sc.Err()
}

// resolver builds a profile's credentials provider.
type resolver struct {
	s        *awsSettings
	profiles map[string]profile
}

// maxSourceDepth bounds a chain of source_profile references.
const maxSourceDepth = 8

func (r *resolver) fromProfile(name string, depth int) (aws.CredentialsProvider, error) {
	if depth > maxSourceDepth {
		return nil, fmt.Errorf("AWS profile %q: source_profile chain longer than %d (a loop?): %w", name, maxSourceDepth, ledger.ErrInvalid)
	}
	p := r.profiles[name]
	if depth > 0 && p == nil {
		return nil, fmt.Errorf("AWS source_profile %q is in neither %s nor %s: %w", name, configFile(), credentialsFile(), ledger.ErrInvalid)
	}
	roleARN := p.get("role_arn")
	switch {
	case roleARN != "" && p.get("web_identity_token_file") != "":
		return r.webIdentity(p.get("web_identity_token_file"), roleARN, p.get("role_session_name"), "profile "+name)
	case roleARN != "":
		if p.get("mfa_serial") != "" {
			return nil, unsupported(name, "mfa_serial (an MFA code to assume the role)")
		}
		var src aws.CredentialsProvider
		var err error
		switch cs := p.get("credential_source"); {
		case p.get("source_profile") == name && p.get("aws_access_key_id") != "":
			src = staticOf(p)
		case p.get("source_profile") != "":
			src, err = r.fromProfile(p.get("source_profile"), depth+1)
		case cs == "Environment":
			src = envKeys()
		case cs == "Ec2InstanceMetadata":
			src = ec2rolecreds.New()
		case cs == "EcsContainer":
			src, err = containerCreds()
			if err == nil && src == nil {
				err = fmt.Errorf("AWS profile %q: credential_source EcsContainer without AWS_CONTAINER_CREDENTIALS_RELATIVE_URI or _FULL_URI: %w", name, ledger.ErrInvalid)
			}
		default:
			err = fmt.Errorf("AWS profile %q: role_arn needs source_profile, credential_source or web_identity_token_file: %w", name, ledger.ErrInvalid)
		}
		if err != nil {
			return nil, err
		}
		return stscreds.NewAssumeRoleProvider(r.sts(aws.NewCredentialsCache(src)), roleARN, func(o *stscreds.AssumeRoleOptions) {
			o.RoleSessionName = p.get("role_session_name")
			if id := p.get("external_id"); id != "" {
				o.ExternalID = aws.String(id)
			}
			if d, err := strconv.Atoi(p.get("duration_seconds")); err == nil && d > 0 {
				o.Duration = time.Duration(d) * time.Second
			}
		}), nil
	case p.get("aws_access_key_id") != "":
		return staticOf(p), nil
	case p.get("credential_process") != "":
		return processcreds.NewProvider(p.get("credential_process")), nil
	case p.get("sso_session") != "" || p.get("sso_start_url") != "" || p.get("sso_account_id") != "":
		return nil, unsupported(name, "IAM Identity Center (sso_*)")
	case p.get("login_session") != "":
		return nil, unsupported(name, "console sign-in (login_session)")
	}
	if depth > 0 {
		return nil, fmt.Errorf("AWS source_profile %q gives no credentials: %w", name, ledger.ErrInvalid)
	}
	c, err := containerCreds()
	if err != nil || c != nil {
		return c, err
	}
	return ec2rolecreds.New(), nil
}

func staticOf(p profile) aws.CredentialsProvider {
	return credentials.NewStaticCredentialsProvider(p.get("aws_access_key_id"), p.get("aws_secret_access_key"), p.get("aws_session_token"))
}

func unsupported(name, what string) error {
	return fmt.Errorf("AWS profile %q signs in with %s, which syncledger does not do itself: give it the AWS CLI's credentials, "+
		"with credential_process = aws configure export-credentials --profile %s --format process in another profile "+
		"(or export the variables: eval \"$(aws configure export-credentials --profile %s --format env)\"): %w",
		name, what, name, name, ledger.ErrInvalid)
}

// webIdentity assumes roleARN with the token in tokenFile.
func (r *resolver) webIdentity(tokenFile, roleARN, session, from string) (aws.CredentialsProvider, error) {
	if roleARN == "" {
		return nil, fmt.Errorf("AWS web identity (%s): a token file without a role ARN (AWS_ROLE_ARN, role_arn): %w", from, ledger.ErrInvalid)
	}
	return stscreds.NewWebIdentityRoleProvider(r.sts(aws.AnonymousCredentials{}), roleARN, stscreds.IdentityTokenFile(tokenFile),
		func(o *stscreds.WebIdentityRoleOptions) { o.RoleSessionName = session }), nil
}

// sts is an STS client of the region with creds.
func (r *resolver) sts(creds aws.CredentialsProvider) *sts.Client {
	o := sts.Options{Region: r.s.region, Credentials: creds, HTTPClient: r.s.httpc, Retryer: r.s.retryer}
	if !strings.EqualFold(os.Getenv("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS"), "true") {
		if ep := firstOf(os.Getenv("AWS_ENDPOINT_URL_STS"), os.Getenv("AWS_ENDPOINT_URL")); ep != "" {
			o.BaseEndpoint = aws.String(ep)
		}
	}
	return sts.New(o)
}

// containerCreds returns the container credentials provider the environment
// configures, nil if none.
func containerCreds() (aws.CredentialsProvider, error) {
	url := os.Getenv("AWS_CONTAINER_CREDENTIALS_FULL_URI")
	if rel := os.Getenv("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI"); rel != "" {
		url = "http://169.254.170.2" + rel
	}
	if url == "" {
		return nil, nil
	}
	return endpointcreds.New(url, func(o *endpointcreds.Options) {
		o.AuthorizationToken = os.Getenv("AWS_CONTAINER_AUTHORIZATION_TOKEN")
		if f := os.Getenv("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE"); f != "" {
			o.AuthorizationTokenProvider = endpointcreds.TokenProviderFunc(func() (string, error) {
				b, err := os.ReadFile(f)
				return strings.TrimSpace(string(b)), err
			})
		}
	}), nil
}
