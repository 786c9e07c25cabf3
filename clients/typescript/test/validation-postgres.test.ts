import { validateOn } from "./validation.js";

validateOn("postgres");
