// English messages for the settings schemas, which are written with zod/mini: its functions are
// dropped by esbuild when unused, where classic zod's methods pull in all of zod (JSON-schema code
// included). zod/mini alone says only "Invalid input"; with English set here, once and for every
// schema (a global of zod's core), the messages are classic zod's word for word. Each file that
// writes a schema imports this module, so no schema parses before it ran.
import { en } from "zod/locales";
import { config } from "zod/mini";

config(en());
