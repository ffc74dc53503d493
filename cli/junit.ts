// JUnit XML for `admission-guard test --junit`, the report CI systems (GitLab, Jenkins, GitHub
// test reporters) read. Every name and message comes from a test file, which anyone who opens a
// pull request writes: all of it is escaped, and characters XML 1.0 cannot hold are replaced, so
// no name can end an attribute, open an element or make the file unreadable.

export interface JunitCase {
  name: string;
  classname: string;
  file: string;
  /** Why it failed (a mismatch); absent when it passed. */
  failure?: { message: string; detail: string };
  /** Why it could not run (a bad test file). */
  error?: { message: string; detail: string };
}

export interface JunitSuite {
  name: string;
  file: string;
  cases: JunitCase[];
}

// XML 1.0's Char: tab, newline, carriage return, and from U+0020 on, but not the surrogates
// (a lone one is not a character) nor U+FFFE/U+FFFF.
const NOT_XML_CHAR = /[^\t\n\r\u0020-\ud7ff\ue000-\ufffd\u{10000}-\u{10ffff}]/gu;

/** Element content keeps its line breaks (readable in CI); only attributes need them escaped. */
const contentEscape = (text: string) =>
  text
    .replace(NOT_XML_CHAR, "\ufffd")
    .replace(/&/g, "&amp;")
    .replace(/</g, "&lt;")
    .replace(/>/g, "&gt;");

/** Text safe in an XML attribute value or element content. */
export function xmlEscape(text: string): string {
  return contentEscape(text)
    .replace(/"/g, "&quot;")
    .replace(/'/g, "&apos;")
    .replace(/\t/g, "&#9;")
    .replace(/\n/g, "&#10;")
    .replace(/\r/g, "&#13;");
}

const attrs = (values: Record<string, string | number>) =>
  Object.entries(values)
    .map(([k, v]) => ` ${k}="${xmlEscape(String(v))}"`)
    .join("");

const count = (cases: JunitCase[], what: "failure" | "error") => cases.filter(c => c[what]).length;

/** The whole document, one string, so it is written once. */
export function junitXml(suites: JunitSuite[]): string {
  const all = suites.flatMap(s => s.cases);
  const lines = [
    '<?xml version="1.0" encoding="UTF-8"?>',
    `<testsuites${attrs({ name: "admission-guard test", tests: all.length, failures: count(all, "failure"), errors: count(all, "error") })}>`,
  ];
  for (const suite of suites) {
    lines.push(
      `  <testsuite${attrs({ name: suite.name, file: suite.file, tests: suite.cases.length, failures: count(suite.cases, "failure"), errors: count(suite.cases, "error") })}>`,
    );
    for (const c of suite.cases) {
      const head = `    <testcase${attrs({ name: c.name, classname: c.classname, file: c.file })}`;
      const outcome = c.failure ? ["failure", c.failure] : c.error ? ["error", c.error] : undefined;
      if (!outcome) {
        lines.push(`${head}/>`);
        continue;
      }
      const [tag, { message, detail }] = outcome as [string, { message: string; detail: string }];
      lines.push(
        `${head}>`,
        `      <${tag}${attrs({ message })}>${contentEscape(detail)}</${tag}>`,
        "    </testcase>",
      );
    }
    lines.push("  </testsuite>");
  }
  lines.push("</testsuites>", "");
  return lines.join("\n");
}
