/**
 * The `charset` parameter of a request's `Content-Type`, as the fingerprint covers it. The same bytes
 * under two charsets are two requests: `{"a":"+AOk-"}` is `{"a":"é"}` as UTF-7 and the text `+AOk-` as
 * UTF-8, and byte E9 is `é` in ISO-8859-1 but `И` in KOI8-R, for any parser that decodes by the
 * parameter (body-parser's `json` and `text`). UTF-8, the default of JSON (RFC 8259 §8.1) and of the
 * parsers, counts as no parameter, so `application/json` and `application/json; charset=UTF-8` stay one
 * request.
 * @module
 */

/**
 * The charset label of `contentType`, lower-cased and unquoted, or `''` when there is none or it names
 * UTF-8.
 * @example
 * charsetOf('text/plain; charset="ISO-8859-1"'); // 'iso-8859-1'
 * charsetOf('application/json; charset=utf-8'); // ''
 */
export function charsetOf(contentType: string | undefined): string {
  // Most requests carry no parameter at all: one search, no split.
  if (contentType === undefined || !contentType.includes(';')) return '';
  const params = contentType.split(';');
  for (let i = 1; i < params.length; i++) {
    const param = params[i] as string;
    const equals = param.indexOf('=');
    if (equals === -1 || param.slice(0, equals).trim().toLowerCase() !== 'charset') continue;
    let label = param
      .slice(equals + 1)
      .trim()
      .toLowerCase();
    if (label.length >= 2 && label.startsWith('"') && label.endsWith('"')) {
      label = label.slice(1, -1).trim();
    }
    return label === 'utf-8' || label === 'utf8' ? '' : label;
  }
  return '';
}
