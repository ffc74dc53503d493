// A raw TLS connection to the controller, for what no HTTP client sends: headers that never end,
// a body that stops half-way, an upload that goes on after the answer. The hostile-flood tests and
// `npm run bench:hostile` (its unauthenticated flood) use it.
import { connect, type TLSSocket } from "node:tls";

export interface RawConnection {
  socket: TLSSocket;
  /** Everything received so far (latin1: status line and headers read as sent). */
  received: () => string;
  /** Resolves with the first bytes of an answer. */
  answered: Promise<void>;
  closed: Promise<void>;
}

export async function openRaw(port: number, ca: string): Promise<RawConnection> {
  const socket = connect({ host: "127.0.0.1", port, ca });
  let received = "";
  const answered = new Promise<void>(done =>
    socket.on("data", chunk => {
      received += chunk.toString("latin1");
      done();
    }),
  );
  // A reset after the server closed is how a refused upload ends: not an error here.
  socket.on("error", () => undefined);
  const closed = new Promise<void>(done => socket.once("close", () => done()));
  await new Promise<void>((ok, fail) => {
    socket.once("secureConnect", ok);
    socket.once("error", fail);
  });
  return { socket, received: () => received, answered, closed };
}

/** The head of a POST of `length` bytes of JSON to `path`. */
export const postHead = (path: string, length: number) =>
  `POST ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: ${length}\r\n\r\n`;

/** Writes `bytes` of body, with backpressure; stops early when the connection closed. */
export function writeBody(raw: RawConnection, bytes: number): Promise<void> {
  const chunk = Buffer.alloc(64 * 1024, "x");
  return new Promise(done => {
    let left = bytes;
    raw.socket.once("close", () => done());
    const more = () => {
      while (left > 0 && !raw.socket.destroyed) {
        left -= chunk.length;
        if (!raw.socket.write(chunk)) return void raw.socket.once("drain", more);
      }
      done();
    };
    more();
  });
}
