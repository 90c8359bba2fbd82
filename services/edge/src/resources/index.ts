import { CHAOSCORE_RESOURCES } from "./chaoscore.js";
import { COUNCIL_RESOURCE_TEMPLATES } from "./council.js";
import type { ResourceDefinition } from "../definitions/resource.js";

/** Every resource of the surface, in the order `resources/list` and `resources/templates/list` give them. */
export const RESOURCE_DEFINITIONS: readonly ResourceDefinition[] = [...CHAOSCORE_RESOURCES, ...COUNCIL_RESOURCE_TEMPLATES];
