// The words of an objective or a description, as the offline provider compares them.

// Words that carry no meaning for matching an objective to a capability.
const STOPWORDS = new Set(
  "a an and are as at be by can do for from get how i in into is it me my of on or our please that the then this to up use using via we what when with you your"
    .split(" "),
);

/**
 * Lower-cases, splits on anything that is not a letter or digit (so `http.request` and
 * `memory_recall` split too), drops stopwords and strips a few English suffixes so that
 * "requests", "requested" and "request" meet.
 */
export function tokenize(text: string): string[] {
  const tokens: string[] = [];
  for (const word of text.toLowerCase().split(/[^\p{L}\p{N}]+/u)) {
    if (word === "" || STOPWORDS.has(word)) continue;
    tokens.push(stem(word));
  }
  return tokens;
}

function stem(word: string): string {
  for (const suffix of ["ing", "ed", "es", "s"]) {
    if (word.length > suffix.length + 3 && word.endsWith(suffix)) return word.slice(0, -suffix.length);
  }
  return word;
}
