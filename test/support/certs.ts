/**
 * Real X.509 material for the gRPC TLS tests, made by the machine's openssl in a temporary folder:
 * a CA, certificates it signs (server and client usage, the SANs asked for), and a second,
 * unrelated CA for the "wrong CA" cases. Laid out as cert-manager writes a Secret: tls.crt,
 * tls.key, ca.crt.
 */
import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

function openssl(args: string[], cwd: string): void {
  execFileSync("openssl", args, { cwd, stdio: ["ignore", "ignore", "pipe"] });
}

export interface CertAuthority {
  readonly dir: string;
  readonly caFile: string;
  /** Issues a certificate for `name` (its own folder: tls.crt, tls.key, ca.crt). */
  issue(name: string, sans?: readonly string[]): IssuedCert;
}

export interface IssuedCert {
  readonly dir: string;
  readonly certFile: string;
  readonly keyFile: string;
  readonly caFile: string;
}

/** A fresh CA in `root/<label>` (a new temporary folder when `root` is not given). */
export function createCertAuthority(label: string, root = mkdtempSync(join(tmpdir(), "chaos-tls-"))): CertAuthority {
  const dir = join(root, label);
  mkdirSync(dir, { recursive: true });
  openssl(
    ["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", "ca.key", "-out", "ca.crt", "-days", "2",
      "-subj", `/CN=${label}`, "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign"],
    dir,
  );
  const caFile = join(dir, "ca.crt");
  return {
    dir,
    caFile,
    issue(name, sans = ["DNS:localhost", "IP:127.0.0.1"]) {
      const out = join(dir, name);
      mkdirSync(out, { recursive: true });
      writeFileSync(join(out, "ext.cnf"), `subjectAltName=${sans.join(",")}\nextendedKeyUsage=serverAuth,clientAuth\nbasicConstraints=CA:FALSE\n`);
      openssl(["req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", "tls.key", "-out", "tls.csr", "-subj", `/CN=${name}`], out);
      openssl(["x509", "-req", "-in", "tls.csr", "-CA", caFile, "-CAkey", join(dir, "ca.key"), "-CAcreateserial", "-out", "tls.crt", "-days", "1", "-extfile", "ext.cnf"], out);
      execFileSync("cp", [caFile, join(out, "ca.crt")]);
      return { dir: out, certFile: join(out, "tls.crt"), keyFile: join(out, "tls.key"), caFile: join(out, "ca.crt") };
    },
  };
}

/** Removes a folder made by {@link createCertAuthority} (its parent temporary folder). */
export function removeCerts(ca: CertAuthority): void {
  rmSync(join(ca.dir, ".."), { recursive: true, force: true });
}
