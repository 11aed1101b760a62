/** The floor workflow's activity: returns at once, so all that is measured is the engine. */
export const floorActivities = {
  async floorNoop(id: string): Promise<string> {
    return id;
  },
};

export type FloorActivities = typeof floorActivities;
